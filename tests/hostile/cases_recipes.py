"""Hostile recipes, conf files and overrides: broken YAML, values of the wrong type or out of
range for every key of the schema (in a file and as an override), deep nesting, aliases,
extends chains. Each must be refused by `trainrun check` with exit 2 naming the file (and
line:column) or the override, in well under its timeout, leaving nothing behind."""
from common import Case, TINY, TINY_FILES, LEAF_KEYS, nest

F = "recipes"
CASES = []


def refuse(name, text, needles=(), argv=None, after=None, timeout=20, quick=True, files=None, env=None, rc=2):
    fs = dict(TINY_FILES, **{"r.yaml": text}) if text is not None else dict(TINY_FILES)
    fs.update(files or {})
    CASES.append(Case(F, name, argv or ["TR", "check", "r.yaml"], rc, names=("r.yaml",) + tuple(needles),
                      files=fs, after=after, timeout=timeout, quick=quick, env=env, absent=("runs",)))


# -- YAML that is not a recipe ---------------------------------------------------------------
syntax = {
    "empty": "",
    "comments-only": "# nothing here\n# at all\n",
    "scalar-root": "just a string\n",
    "list-root": "- model\n- data\n",
    "null-root": "~\n",
    "unclosed-flow": "model: {arch: mlp, layers: 1\n",
    "unclosed-list": "model: [1, 2\n",
    "unterminated-quote": 'name: "tiny\n',
    "bad-indent": "model:\n  arch: mlp\n layers: 1\n",
    "tab-indent": "model:\n\tarch: mlp\n",
    "duplicate-key": TINY + "name: again\n",
    "duplicate-nested": "model: {arch: mlp, arch: gpt}\n",
    "two-documents": TINY + "---\n" + TINY,
    "bare-colon": ": value\n",
    "nul-byte": "name: ti\0ny\n",
    "invalid-utf8": "name: \xff\xfe tiny\n",
    "utf16": "\ufeffname: tiny\n".encode("utf-16"),
    "lone-surrogate-escape": 'name: "\\ud800"\n',
    "undefined-alias": "model: *nothing\n",
    "alias-cycle-merge": "a: &a {<<: *a}\n",
    "unknown-tag": "model: !!python/object:os.system {}\n",
    "binary-tag": "name: !!binary aGVsbG8=\n",
    "complex-key": "? [model, data]\n: 1\n",
    "mapping-key-mapping": "{a: 1}: 2\n",
    "huge-integer": TINY + "seed: 123456789012345678901234567890\n",
    "directive-only": "%YAML 1.1\n---\n",
    "bad-directive": "%YAML 9.9\n---\nname: x\n",
    "control-char": "name: ti\x01ny\n",
    "only-document-end": "...\n",
    "deep-flow-100": "model: " + "[" * 100 + "]" * 100 + "\n",
}
for name, text in syntax.items():
    refuse("syntax/" + name, text)

# Billion laughs: aliases that expand to 10^9 nodes must be refused, not expanded.
laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    "%s: &%s [%s]\n" % (chr(98 + i), chr(98 + i), ", ".join(["*" + chr(97 + i)] * 10)) for i in range(8))
refuse("syntax/billion-laughs", laughs, timeout=30)
refuse("syntax/alias-as-key", "name: &n tiny\n*n : 1\n")
# A file past the 1 MiB size limit, and nesting deep enough that libyaml's loader goes
# super-linear: refused in under a second once the depth is bounded while parsing.
refuse("size/over-1MiB", "# " + "x" * (1 << 20) + "\n", ["1 MiB"])
refuse("size/long-line-900KiB", "name: " + "x" * (900 << 10) + "\n")
refuse("depth/flow-200KB", "model: " + "[" * 100000 + "]" * 100000 + "\n", after="inputs", timeout=10)
refuse("depth/flow-1MiB", "model: " + "[" * 500000 + "]" * 500000 + "\n", after="inputs", timeout=10)
refuse("depth/mappings-50k", "model: " + "{a: " * 50000 + "1" + "}" * 50000 + "\n", after="inputs", timeout=10)
refuse("depth/block-5000", "".join("  " * i + "k%d:\n" % i for i in range(5000)) + "  " * 5000 + "v: 1\n",
       after="inputs", timeout=10)
refuse("depth/override-120KB", None, ["override"], argv=["TR", "check", "r.yaml", "model.hidden=" + "[" * 60000],
       after="inputs", timeout=10)

# -- every key of the schema, given a value of the wrong kind ---------------------------------
wrong_scalar = {"int": "abc", "num": "abc", "bool": "maybe", "enum": "no-such-choice", "size": "lots",
                "dur": "soon", "list": "5"}
for i, (key, kind) in enumerate(LEAF_KEYS):
    text = "extends: base.yaml\n" + nest(key, "{x: 1}")
    refuse("type/file/" + key, text, [key], files={"base.yaml": TINY}, quick=i % 2 == 0)   # half in make check
    if kind in wrong_scalar:
        CASES.append(Case(F, "type/override/" + key, ["TR", "check", "r.yaml", key + "=" + wrong_scalar[kind]], 2,
                          names=("override '%s=" % key, key), files=dict(TINY_FILES), absent=("runs",),
                          quick=False))   # the file cases above cover each key in make check

# -- numbers out of range ---------------------------------------------------------------------
out_of_range = [
    ("model.layers", "-1"), ("model.layers", "0"), ("model.hidden", "0"), ("model.hidden", "1e30"),
    ("model.dropout", "1.5"), ("model.dropout", "-0.1"), ("model.dropout", ".nan"), ("train.batch_size", "0"),
    ("train.batch_size", "-64"), ("train.epochs", "-5"), ("train.steps", "0"), ("train.steps", "1e30"),
    ("train.optimizer.lr", "-1"), ("train.optimizer.lr", ".inf"), ("train.optimizer.lr", ".nan"),
    ("train.optimizer.betas", "[1.5, 0.9]"), ("train.optimizer.betas", "[0.9]"), ("train.grad_clip", "-1"),
    ("budget.memory", "0"), ("budget.memory", "-1GiB"), ("budget.memory", "99999999TiB"),
    ("budget.time", "-5s"), ("budget.time", "0s"), ("seed", "-1"), ("seed", "99999999999999999999999"),
    ("data.num_workers", "-1"), ("data.num_workers", "100000"), ("report.keep", "-3"),
    ("optimize.loss_scale.init", "0"), ("train.schedule.warmup", "-0.5"), ("model.max_len", "0"),
    ("report.notify.timeout", "-1s"),
]
for i, (key, value) in enumerate(out_of_range):
    CASES.append(Case(F, "range/%s=%s" % (key, value), ["TR", "check", "r.yaml", key + "=" + value], 2,
                      names=("override '%s=" % key,), files=dict(TINY_FILES), absent=("runs",)))

# -- override syntax ---------------------------------------------------------------------------
bad_overrides = {"no-key": "=1", "no-value-sign": "model.hidden", "empty-part": "model..hidden=1",
                 "leading-dot": ".model=1", "trailing-dot": "model.=1", "unclosed": "model.hidden=[",
                 "reset-nothing": "~", "reset-unknown": "~model.nosuch", "unknown-key": "model.hiden=3",
                 "mapping-as-scalar": "model=3", "newline": "name=a\nb", "nul-free-but-huge": "name=" + "y" * 100000,
                 "two-equals-key": "model.hidden==3", "space-key": "model hidden=3"}
for name, o in bad_overrides.items():
    needle = "'model.hidden'" if name == "no-value-sign" else "override '"
    CASES.append(Case(F, "override/" + name, ["TR", "check", "r.yaml", o], 2, names=(needle,),
                      files=dict(TINY_FILES), absent=("runs",)))
CASES.append(Case(F, "override/did-you-mean", ["TR", "check", "r.yaml", "model.hiden=3"], 2,
                  names=("did you mean 'model.hidden'",), files=dict(TINY_FILES)))
CASES.append(Case(F, "override/reset-extends", ["TR", "check", "r.yaml", "~extends"], 2,
                  names=("override '~extends'",), not_in=("did you mean 'extends'",), files=dict(TINY_FILES),
                  after="inputs"))

# -- extends ------------------------------------------------------------------------------------
ext = {
    "missing": ({"r.yaml": "extends: nosuch.yaml\n"}, ["nosuch.yaml"]),
    "self": ({"r.yaml": "extends: r.yaml\n"}, []),
    "cycle": ({"r.yaml": "extends: b.yaml\n", "b.yaml": "extends: r.yaml\n"}, ["b.yaml"]),
    "dev-zero": ({"r.yaml": "extends: /dev/zero\n"}, ["/dev/zero"]),
    "directory": ({"r.yaml": "extends: sub\n", "sub": ("dir",)}, ["sub"]),
    "fifo": ({"r.yaml": "extends: pipe.yaml\n", "pipe.yaml": ("fifo",)}, ["pipe.yaml"]),
    "not-a-string": ({"r.yaml": "extends: {a: 1}\n"}, ["extends"]),
    "broken-parent": ({"r.yaml": "extends: b.yaml\n", "b.yaml": "model: [\n"}, ["b.yaml"]),
    "parent-unknown-key": ({"r.yaml": "extends: b.yaml\n", "b.yaml": TINY + "nosuch: 1\n"}, ["b.yaml", "nosuch"]),
    "chain-of-64": (dict({"r.yaml": "extends: e0.yaml\n"},
                         **{"e%d.yaml" % i: "extends: e%d.yaml\n" % (i + 1) for i in range(63)},
                         **{"e63.yaml": "extends: e0.yaml\n"}), []),
}
for name, (files, needles) in ext.items():
    fs = dict(TINY_FILES)
    fs.update(files)
    CASES.append(Case(F, "extends/" + name, ["TR", "check", "r.yaml"], 2, names=("r.yaml",) + tuple(needles),
                      files=fs, timeout=20, after="inputs" if name == "fifo" else None))

# -- conf files ---------------------------------------------------------------------------------
confs = {
    "broken": ("model: [\n", None), "unknown-key": ("nosuch: 1\n", None), "list-root": ("- a\n", None),
    "wrong-type": ("train: {batch_size: many}\n", None), "directory": (("dir",), "inputs"),
    "fifo": (("fifo",), "inputs"), "dev-zero": (None, "inputs"),
}
for var in ("TRAINRUN_CONF", "TRAINRUN_SYSTEM_CONF"):
    for name, (content, after) in confs.items():
        fs = dict(TINY_FILES)
        path = "/dev/zero" if content is None else "$SCRATCH/my.conf"
        if content is not None:
            fs["my.conf"] = content
        CASES.append(Case(F, "conf/%s/%s" % (var, name), ["TR", "check", "r.yaml"], 2,
                          names=("/dev/zero" if content is None else "my.conf",), files=fs, env={var: path},
                          timeout=15, after=after))
CASES.append(Case(F, "conf/TRAINRUN_CONF/missing", ["TR", "check", "r.yaml"], 2, names=("nosuch.conf",),
                  files=dict(TINY_FILES), env={"TRAINRUN_CONF": "$SCRATCH/nosuch.conf"}))

# -- the recipe file itself -----------------------------------------------------------------------
recipe_files = {
    "missing": ("nosuch.yaml", {}, None), "directory": ("d.yaml", {"d.yaml": ("dir",)}, None),
    "dev-null": ("/dev/null", {}, None), "fifo": ("p.yaml", {"p.yaml": ("fifo",)}, "inputs"),
    "dev-zero": ("/dev/zero", {}, "inputs"), "dangling-link": ("l.yaml", {"l.yaml": ("link", "gone.yaml")}, None),
}
for name, (path, files, after) in recipe_files.items():
    fs = dict(TINY_FILES)
    fs.update(files)
    for sub in ("check", "plan"):
        CASES.append(Case(F, "file/%s/%s" % (sub, name), ["TR", sub, path], 2, names=(path,), files=fs,
                          timeout=15, after=after, absent=("runs",)))
