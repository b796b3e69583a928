"""Hostile data: CSV, TSV, JSON Lines, text and IDX files that are broken, truncated, not what
they claim or not files at all; data set definitions that are invalid; tokenizer files that
are. `trainrun plan` reads the data, so each case plans the tiny recipe on it: exit 4 naming
the file (line:column where it has lines), or 2 for a definition or recipe that is invalid,
nothing written."""
import gzip
import struct

from common import Case, TINY, TRAIN_CSV, tiny_recipe

F = "data"
CASES = []


def plan(name, files, rc=4, needles=(), argv=None, after=None, timeout=30, quick=True, env=None, recipe=None):
    fs = {"r.yaml": recipe or TINY, "train.csv": TRAIN_CSV}
    fs.update(files)
    CASES.append(Case(F, name, argv or ["TR", "plan", "r.yaml"], rc, names=tuple(needles), files=fs, after=after,
                      timeout=timeout, quick=quick, env=env, absent=("runs",)))


# -- inline CSV ------------------------------------------------------------------------------------
good = TRAIN_CSV.splitlines()
csv_cases = {
    "empty": ("", 4, ["train.csv"], None),
    "blank-lines": ("\n\n\n", 4, ["train.csv"], None),
    "ragged": ("\n".join(good[:3] + ["1.0,2.0,3.0"] + good[3:]) + "\n", 4, ["train.csv:4:"], None),
    "text-cell": ("\n".join(good[:5] + ["1.0,abc,3.0,4.0,1"] + good[5:]) + "\n", 4, ["train.csv:6:"], None),
    "negative-label": ("\n".join(good[:2] + ["1.0,2.0,3.0,4.0,-1"] + good[2:]) + "\n", 0, [], None),
    "fractional-label": ("\n".join(good[:2] + ["1.0,2.0,3.0,4.0,1.5"] + good[2:]) + "\n", 0, [], None),
    "nan-cell": ("\n".join(good[:2] + ["nan,2.0,3.0,4.0,1"] + good[2:]) + "\n", 4, ["train.csv:3:"], "csv"),
    "na-cell": ("\n".join(good[:2] + ["NA,2.0,3.0,4.0,1"] + good[2:]) + "\n", 4, ["train.csv:3:"], "csv"),
    "empty-cell": ("\n".join(good[:2] + [",2.0,3.0,4.0,1"] + good[2:]) + "\n", 4, ["train.csv:3:"], None),
    "inf-cell": ("\n".join(good[:2] + ["inf,2.0,3.0,4.0,1"] + good[2:]) + "\n", 4, ["train.csv:3:"], "csv"),
    "overflow-cell": ("\n".join(good[:2] + ["1e999,2.0,3.0,4.0,1"] + good[2:]) + "\n", 4, ["train.csv:3:"], "csv"),
    "nul-byte": ("\n".join(good[:2] + ["1.0,2\x00.0,3.0,4.0,1"] + good[2:]) + "\n", 4, ["train.csv:3:"], None),
    "invalid-utf8": ("\n".join(good[:2] + ["1.0,\xff\xfe,3.0,4.0,1"] + good[2:]) + "\n", 4, ["train.csv:3:"], None),
    # A label that is not a whole number from 0 to 2^31 - 1 makes every label a class name
    # (trainrun-dataset(5), csv): "-1", "1.5" and "99999999999" are classes beside "0" and "1".
    "one-column": ("1\n2\n3\n", 4, ["train.csv"], None),
    "huge-label": ("\n".join(good[:2] + ["1.0,2.0,3.0,4.0,99999999999"] + good[2:]) + "\n", 0, [], None),
}
for name, (text, rc, needles, after) in csv_cases.items():
    plan("csv/" + name, {"train.csv": text.encode("latin-1") if "\xff" in text else text}, rc, needles, after=after)
plan("csv/line-2MiB", {"train.csv": "1.0," * (1 << 19) + "0\n"}, 3, ["budget.memory"],   # 512 Ki features
     argv=["TR", "plan", "r.yaml", "budget.memory=128MiB"])   # its smallest footprint is 211 MiB
plan("csv/crlf", {"train.csv": TRAIN_CSV.replace("\n", "\r\n")}, 0)
plan("csv/no-final-newline", {"train.csv": TRAIN_CSV.rstrip("\n")}, 0)
plan("csv/string-labels-header", {"train.csv": "a,b,c,d,species\n" + "\n".join(
    ",".join(l.split(",")[:4]) + "," + ["setosa", "versicolor", "virginica"][int(l.split(",")[4])] for l in good) + "\n"},
    0, after="csv")
plan("csv/quoted-fields", {"train.csv": "\n".join('"%s",%s' % tuple(l.split(",", 1)) for l in good) + "\n"}, 0,
     after="csv")
gz = gzip.compress(TRAIN_CSV.encode())
plan("csv/gzip-truncated", {"r.yaml": TINY.replace("train.csv", "train.csv.gz"), "train.csv.gz": gz[:len(gz) // 2]},
     4, ["train.csv.gz"])
plan("csv/gzip-bad-crc", {"r.yaml": TINY.replace("train.csv", "train.csv.gz"),
                          "train.csv.gz": gz[:-8] + b"\0\0\0\0" + gz[-4:]}, 4, ["train.csv.gz"])
plan("csv/gzip-trailing-garbage", {"r.yaml": TINY.replace("train.csv", "train.csv.gz"),
                                   "train.csv.gz": gz + b"garbage"}, (0, 4))   # gzip(1) too ignores it
plan("csv/sha256-mismatch", {}, 4, ["train.csv", "data.train.sha256"],
     argv=["TR", "plan", "r.yaml", "data.train.sha256=" + "0" * 64])
plan("csv/sha256-malformed", {}, 2, ["data.train.sha256"], argv=["TR", "plan", "r.yaml", "data.train.sha256=xyz"])
plan("csv/missing", {}, 4, ["nosuch.csv"], argv=["TR", "plan", "r.yaml", "data.train.source=nosuch.csv"])
plan("csv/missing-valid", {}, 4, ["gone.csv"], argv=["TR", "plan", "r.yaml", "data.valid.source=gone.csv"])
plan("csv/directory", {"d.csv": ("dir",)}, 4, ["d.csv"], argv=["TR", "plan", "r.yaml", "data.train.source=d.csv"])
plan("csv/fifo", {"p.csv": ("fifo",)}, 4, ["p.csv"], argv=["TR", "plan", "r.yaml", "data.train.source=p.csv"],
     after="inputs", timeout=15)
plan("csv/dev-zero", {"z.csv": ("link", "/dev/zero")}, 4, ["z.csv"],
     argv=["TR", "plan", "r.yaml", "data.train.source=z.csv"], after="inputs", timeout=15)
plan("csv/dev-null", {"n.csv": ("link", "/dev/null")}, 4, ["n.csv"],
     argv=["TR", "plan", "r.yaml", "data.train.source=n.csv"], timeout=15)
plan("csv/ftp-url", {}, 4, ["ftp://"], argv=["TR", "plan", "r.yaml", "data.train.source=ftp://example.org/x.csv"])
plan("csv/file-url-missing", {}, 4, ["/nonexistent.csv"],
     argv=["TR", "plan", "r.yaml", "data.train.source=file:///nonexistent.csv"])
plan("csv/check-too", {}, 2, ["data.train.format"], argv=["TR", "check", "r.yaml", "data.train.format=idx"],
     after="csv")

# -- inline sources of the other formats (trainrun-recipe(5)'s own tiny-gpt example) ------------------
GPT = ("name: tiny-gpt\ndevice: cpu\nmodel: {arch: gpt, layers: 1, hidden: 16, heads: 2, ffn: 32, max_len: 16}\n"
       "data:\n  train: {source: corpus/train.txt, format: text}\n  tokenizer: {kind: bytes}\n"
       "train: {batch_size: 4, steps: 10}\nbudget: {memory: 512MiB}\n")
corpus = "It is a truth universally acknowledged, that a single man in possession\n" * 40
plan("inline/text", {"corpus/train.txt": corpus}, 0, recipe=GPT, after="csv")
plan("inline/text-check", {"corpus/train.txt": corpus}, 0, recipe=GPT, argv=["TR", "check", "r.yaml"])
plan("inline/text-missing", {}, 4, ["corpus/train.txt"], recipe=GPT, after="csv")
plan("inline/text-invalid-utf8", {"corpus/train.txt": b"fine\n\xc3\x28 broken\n" * 40}, 4, ["corpus/train.txt:2:1:"],
     recipe=GPT, after="csv")
BERT = ("name: tiny-bert\ndevice: cpu\nmodel: {arch: bert, layers: 1, hidden: 16, heads: 2, ffn: 32, max_len: 16}\n"
        "data:\n  train: {source: t.%s, format: %s, text: text, label: label}\n  tokenizer: {kind: bytes}\n"
        "train: {batch_size: 4, steps: 10}\nbudget: {memory: 512MiB}\n")
tsv = "text\tlabel\n" + "".join("sample %d\t%d\n" % (i, i % 2) for i in range(40))
jsonl = "".join('{"text": "sample %d", "label": %d}\n' % (i, i % 2) for i in range(40))
plan("inline/tsv", {"t.tsv": tsv}, 0, recipe=BERT % ("tsv", "tsv"), after="csv")
plan("inline/jsonl", {"t.jsonl": jsonl}, 0, recipe=BERT % ("jsonl", "jsonl"), after="csv")
plan("inline/jsonl-broken", {"t.jsonl": jsonl + '{"text": "x", "label": \n'}, 4, ["t.jsonl:41:"],
     recipe=BERT % ("jsonl", "jsonl"), after="csv")
plan("inline/tsv-missing-field", {"t.tsv": tsv + "only text\n"}, 4, ["t.tsv:42:"], recipe=BERT % ("tsv", "tsv"),
     after="csv")

# -- data sets by name ----------------------------------------------------------------------------------
plan("dataset/unknown", {}, 4, ["nosuch"], argv=["TR", "plan", "r.yaml", "~data.train", "data.dataset=nosuch"])
plan("dataset/traversal", {}, 2, ["../../evil"], argv=["TR", "check", "r.yaml", "~data.train",
                                                       "data.dataset=../../evil"], after="csv")
plan("dataset/absolute", {}, 2, ["/etc"], argv=["TR", "check", "r.yaml", "~data.train", "data.dataset=/etc"],
     after="csv")

# Definitions in a folder of the case's own (TRAINRUN_DATASETS).
DS = {"TRAINRUN_DATASETS": "$SCRATCH/ds"}
BYNAME = tiny_recipe(data="  dataset: mine\n")


def definition(name, text, extra_files=None, rc=4, needles=(), after=None, recipe=None):
    """A case on ds/mine/dataset.yaml; the message names the definition or the file given."""
    fs = {"ds/mine/dataset.yaml": text}
    fs.update({"ds/mine/" + k: v for k, v in (extra_files or {}).items()})
    plan("definition/" + name, fs, rc, tuple(needles) or ("ds/mine/",), recipe=recipe or BYNAME, env=DS, after=after)


CSV_DEF = "name: mine\nformat: csv\nheader: none\nlabel: last\ntrain: {source: train.csv}\n"
# An invalid definition is a bad data set (4), as trainrun(1) has it, not a bad recipe.
definition("broken-yaml", "name: mine\nformat: [csv\n")
definition("unknown-key", CSV_DEF + "nosuch: 1\n", needles=["nosuch"])
definition("unknown-format", CSV_DEF.replace("format: csv", "format: parquet"), needles=["parquet"])
definition("no-sources", "name: mine\nformat: csv\n")
definition("empty", "")
definition("source-missing", CSV_DEF, rc=4, needles=["train.csv"])
definition("sha-mismatch", CSV_DEF.replace("{source: train.csv}", "{source: train.csv, sha256: %s}" % ("a" * 64)),
           {"train.csv": TRAIN_CSV}, rc=4, needles=["train.csv"])
definition("split-too-big", CSV_DEF + "split: {valid: 1000}\n", {"train.csv": TRAIN_CSV}, rc=4)
definition("split-negative", CSV_DEF + "split: {valid: -0.5}\n", {"train.csv": TRAIN_CSV})
definition("label-column-out-of-range", CSV_DEF.replace("label: last", "label: 99"), {"train.csv": TRAIN_CSV}, rc=4)
definition("over-1MiB", CSV_DEF + "# " + "x" * (1 << 20) + "\n", {"train.csv": TRAIN_CSV}, needles=["1 MiB"])
definition("depth-200KB", CSV_DEF + "description: " + "[" * 100000 + "]" * 100000 + "\n", after="csv")
definition("prepare-url", CSV_DEF + "prepare: https://example.org/prepare.sh\n", {"train.csv": TRAIN_CSV}, rc=(2, 4),
           needles=["prepare"])
definition("prepare-missing", CSV_DEF + "prepare: nosuch.sh\n", rc=(2, 4), needles=["nosuch.sh"])
definition("prepare-fails", CSV_DEF + "prepare: prep.sh\n", {"prep.sh": "#!/bin/sh\necho no >&2\nexit 3\n"}, rc=4,
           needles=["prep.sh"])
definition("prepare-writes-nothing", CSV_DEF + "prepare: prep.sh\n", {"prep.sh": "#!/bin/sh\nexit 0\n"}, rc=4,
           needles=["train.csv"])

# IDX pairs.
def idx_images(n, r, c, magic=0x803):
    return struct.pack(">IIII", magic, n, r, c) + bytes((i * 7) % 256 for i in range(n * r * c))


def idx_labels(labels, magic=0x801, n=None):
    return struct.pack(">II", magic, len(labels) if n is None else n) + bytes(labels)


IDX_DEF = ("name: mine\nformat: idx\nnum_classes: 10\ntrain: {images: {source: img.idx}, labels: {source: lab.idx}}\n")
idx_cases = {
    "bad-magic": (idx_images(20, 4, 4, magic=0x1234), idx_labels([1] * 20), ["img.idx"]),
    "labels-magic": (idx_images(20, 4, 4), idx_labels([1] * 20, magic=0x803), ["lab.idx"]),
    "truncated-images": (idx_images(20, 4, 4)[:100], idx_labels([1] * 20), ["img.idx"]),
    "truncated-labels": (idx_images(20, 4, 4), idx_labels([1] * 20)[:15], ["lab.idx"]),
    "count-mismatch": (idx_images(20, 4, 4), idx_labels([1] * 19), ["lab.idx"]),
    "label-too-big": (idx_images(20, 4, 4), idx_labels([1] * 19 + [10]), ["lab.idx"]),
    "huge-dims": (struct.pack(">IIII", 0x803, 0xffffffff, 0xffffffff, 0xffffffff), idx_labels([]), ["img.idx"]),
    "header-only": (idx_images(20, 4, 4)[:16], idx_labels([1] * 20), ["img.idx"]),
    "empty-images": (b"", idx_labels([1] * 20), ["img.idx"]),
}
for name, (img, lab, needles) in idx_cases.items():
    definition("idx/" + name, IDX_DEF, {"img.idx": img, "lab.idx": lab}, rc=4, needles=needles)

# Text-classification and language-modelling sets.
TSV_DEF = ("name: mine\nformat: tsv\nheader: names\ntext: text\nlabel: label\nnum_classes: 2\n"
           "class_names: [neg, pos]\ntrain: {source: t.tsv}\n")
BERT_BYNAME = ("name: tb\ndevice: cpu\nmodel: {arch: bert, layers: 1, hidden: 16, heads: 2, ffn: 32, max_len: 16}\n"
               "data: {dataset: mine, tokenizer: {kind: bytes}}\ntrain: {batch_size: 4, steps: 10}\nbudget: {memory: 512MiB}\n")
tsv_rows = "".join("sample %d\t%s\n" % (i, ["neg", "pos"][i % 2]) for i in range(40))
text_cases = {
    "tsv-unknown-label": ("text\tlabel\n" + tsv_rows + "x\tmaybe\n", ["t.tsv:42:"]),
    "tsv-no-label-column": ("text\tother\n" + tsv_rows, ["t.tsv", "'label'"]),
    "tsv-extra-field": ("text\tlabel\n" + tsv_rows + "a\tpos\tmore\n", ["t.tsv:42:"]),
    "tsv-invalid-utf8": (("text\tlabel\n" + tsv_rows).encode() + b"\xff\xff\tpos\n", ["t.tsv:42:"]),
    "tsv-empty": ("", ["t.tsv"]),
    "tsv-header-only": ("text\tlabel\n", ["t.tsv"]),
}
for name, (content, needles) in text_cases.items():
    definition("text/" + name, TSV_DEF, {"t.tsv": content}, rc=4, needles=needles, recipe=BERT_BYNAME)
JSONL_DEF = TSV_DEF.replace("format: tsv\nheader: names\n", "format: jsonl\n").replace("t.tsv", "t.jsonl")
jrows = "".join('{"text": "s %d", "label": "%s"}\n' % (i, ["neg", "pos"][i % 2]) for i in range(40))
jsonl_cases = {
    "jsonl-not-object": (jrows + "[1, 2]\n", ["t.jsonl:41:"]),
    "jsonl-truncated": (jrows + '{"text": "s", "lab', ["t.jsonl:41:"]),
    "jsonl-label-number": (jrows + '{"text": "s", "label": 7}\n', ["t.jsonl:41:"]),
    "jsonl-text-missing": (jrows + '{"label": "pos"}\n', ["t.jsonl:41:"]),
    "jsonl-text-not-string": (jrows + '{"text": {"a": 1}, "label": "pos"}\n', ["t.jsonl:41:"]),
    "jsonl-deep": (jrows + '{"text": "s", "label": "pos", "x": ' + "[" * 100000 + "]" * 100000 + "}\n",
                   ["t.jsonl:41:"]),
    "jsonl-nul-escape": (jrows + '{"text": "a\\u0000b", "label": "pos"}\n', None),
}
for name, (content, needles) in jsonl_cases.items():
    definition("text/" + name, JSONL_DEF, {"t.jsonl": content}, rc=4 if needles else (0, 4), needles=needles or (),
               recipe=BERT_BYNAME)
LM_DEF = "name: mine\nformat: text\ntrain: {source: a.txt, lines: [1, 500]}\n"
GPT_BYNAME = BERT_BYNAME.replace("arch: bert", "arch: gpt").replace("name: tb", "name: tg")
definition("text/lines-past-end", LM_DEF, {"a.txt": corpus}, rc=4, needles=["lines"], recipe=GPT_BYNAME)
definition("text/lines-reversed", LM_DEF.replace("[1, 500]", "[30, 2]"), {"a.txt": corpus}, rc=4, needles=["lines"],
           recipe=GPT_BYNAME)
definition("text/invalid-utf8", LM_DEF.replace(", lines: [1, 500]", ""), {"a.txt": corpus.encode() + b"\xc0\xaf\n"},
           rc=4, needles=["a.txt:41:"], recipe=GPT_BYNAME)
definition("text/too-short", LM_DEF.replace(", lines: [1, 500]", ""), {"a.txt": "hi\n"}, rc=4, needles=["train"],
           recipe=GPT_BYNAME)

# Tokenizer files.
BERT_WP = BERT_BYNAME.replace("{kind: bytes}", "{kind: wordpiece, vocab: mine/vocab.txt}")
vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n" + "".join("w%d\n" % i for i in range(50))
tok_cases = {
    "wordpiece-missing": ({}, ["vocab.txt"]),
    "wordpiece-empty": ({"vocab.txt": ""}, ["vocab.txt"]),
    "wordpiece-no-unk": ({"vocab.txt": vocab.replace("[UNK]\n", "")}, ["vocab.txt", "[UNK]"]),
    "wordpiece-duplicate": ({"vocab.txt": vocab + "w3\n"}, ["vocab.txt:"]),
    "wordpiece-blank-line": ({"vocab.txt": vocab + "\nmore\n"}, ["vocab.txt:"]),
    "wordpiece-invalid-utf8": ({"vocab.txt": vocab.encode() + b"\xfe\n"}, ["vocab.txt:"]),
    "wordpiece-directory": ({"vocab.txt": ("dir",)}, ["vocab.txt"]),
    "wordpiece-fifo": ({"vocab.txt": ("fifo",)}, ["vocab.txt"]),
}
for name, (files, needles) in tok_cases.items():
    fs = {"t.tsv": "text\tlabel\n" + tsv_rows}
    fs.update(files)
    definition("tokenizer/" + name, TSV_DEF, fs, rc=4, needles=needles, recipe=BERT_WP,
               after="inputs" if name.endswith("fifo") else None)
BPE_DEF = LM_DEF.replace(", lines: [1, 500]", "")
GPT_BPE = GPT_BYNAME.replace("{kind: bytes}", "{kind: gpt2-bpe, vocab: mine/encoder.json, merges: mine/vocab.bpe}")
bpe_cases = {
    "bpe-encoder-not-json": ({"encoder.json": "{not json", "vocab.bpe": "#version: 0.2\n"}, ["encoder.json"]),
    "bpe-encoder-list": ({"encoder.json": "[1, 2]", "vocab.bpe": "#version: 0.2\n"}, ["encoder.json"]),
    "bpe-encoder-few-bytes": ({"encoder.json": '{"a": 0, "b": 1}', "vocab.bpe": "#version: 0.2\n"},
                              ["encoder.json"]),
    "bpe-merges-missing": ({"encoder.json": ("copy", "datasets/vocab/gpt2/encoder.json")}, ["vocab.bpe"]),
    "bpe-merges-bad-line": ({"encoder.json": ("copy", "datasets/vocab/gpt2/encoder.json"),
                             "vocab.bpe": "#version: 0.2\nonlyone\n"}, ["vocab.bpe:2"]),
    "bpe-merges-unknown-token": ({"encoder.json": ("copy", "datasets/vocab/gpt2/encoder.json"),
                                  "vocab.bpe": "#version: 0.2\nzzzq xxxq\n"}, ["vocab.bpe:2"]),
}
for name, (files, needles) in bpe_cases.items():
    fs = {"a.txt": corpus}
    fs.update(files)
    definition("tokenizer/" + name, BPE_DEF, fs, rc=4, needles=needles, recipe=GPT_BPE)
