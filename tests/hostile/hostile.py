#!/usr/bin/env python3
"""The hostile-input suite: trainrun given bad inputs and faults, as a careless or hostile
user would, each case asserting its exit status, that the message names the input, and what
is left on disk (nothing half-written, nothing overwritten). The case tables are
tests/hostile/cases_<family>.py; tests/hostile.sh runs the quick ones in make check,
bench/hostile/run-all every one (with an ASan build as TRAINRUN, crashes show as sanitizer
reports).

    hostile.py [--all] [--family F] [--jobs N] [--list] [--verbose] [NAME...]

Environment: TRAINRUN (the binary), srcdir (the source tree). Prints one line a failed case,
then counts per family and in total: cases, passed, failed, crashes (a signal or a sanitizer
report), hangs (past the case's timeout) and data lost (a file that was there before changed,
vanished or was replaced, or a temporary left behind).
"""
import concurrent.futures
import hashlib
import http.server
import importlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if __name__ == "__main__":   # the case tables import this module by its name: the same one
    sys.modules["hostile"] = sys.modules["__main__"]
FAMILIES = ["recipes", "data", "downloads", "checkpoints", "faults", "signals", "limits", "links",
            "security"]
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:")


class Case:
    """One hostile input. files: path -> str/bytes, or a tuple naming something else to make
    there: ("fifo",), ("dir",), ("link", target), ("copy", source path), ("mode", 0o000, text).
    argv: the command, "TR" standing for the binary; run in the case's scratch folder. rc: the
    exit status (or a tuple of those allowed). names: strings stderr must hold (the input's
    name). not_in: strings neither stdout nor stderr may hold. absent: paths that must not
    exist afterwards. changes: paths the command may change (all other files set up must stay
    as they were). after: the branch whose merge this case waits for (for the report only).
    quick: run by make check (else by bench/hostile/run-all only). setup(dir), check(dir, res)
    -> list of problems: extra steps. signal: (signal number, seconds) sent to the command."""

    def __init__(self, family, name, argv, rc, names=(), files=None, not_in=(), absent=(), changes=(),
                 env=None, timeout=60, quick=True, after=None, setup=None, check=None, signal=None,
                 stdin=None, controls=False):
        self.family, self.name, self.argv, self.rc = family, name, argv, rc
        self.names, self.files, self.not_in, self.absent = names, files or {}, not_in, absent
        self.changes, self.env, self.timeout, self.quick, self.after = changes, env or {}, timeout, quick, after
        self.setup, self.check, self.signal, self.stdin, self.controls = setup, check, signal, stdin, controls

    @property
    def id(self):
        return "%s/%s" % (self.family, self.name)


class Result:
    def __init__(self, case):
        self.case, self.problems, self.crash, self.hang, self.lost = case, [], False, False, False
        self.rc, self.out, self.err, self.seconds = None, "", "", 0.0


class Misbehaving(http.server.BaseHTTPRequestHandler):
    """What the downloads family fetches from: /ok/NAME serves cases_downloads.BODIES[NAME]; the
    other paths misbehave as named."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k == "Content-Length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        try:
            if path.startswith("/ok/"):
                self.send(200, BODIES[path[4:]])
            elif path.startswith("/status/"):
                self.send(int(path.split("/")[2]), b"no")
            elif path == "/redirect-loop":
                self.send(302, headers=[("Location", "/redirect-loop")])
            elif path == "/redirect-ftp":
                self.send(302, headers=[("Location", "ftp://127.0.0.1/x.csv")])
            elif path == "/endless":   # 200, no length, never ends
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                line = b"1.0,2.0,3.0,4.0,0\n" * 4096
                while True:
                    self.wfile.write(line)
            elif path == "/short":   # promises more than it sends, then hangs up
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(b"1.0,2.0,3.0,4.0,0\n" * 10)
                self.close_connection = True
            elif path == "/stall":
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(b"1.0,")
                self.wfile.flush()
                time.sleep(40)
            elif path == "/huge-length":
                self.send_response(200)
                self.send_header("Content-Length", str(1 << 50))
                self.end_headers()
                self.wfile.write(b"1.0,2.0\n")
                self.close_connection = True
            else:
                self.send(404, b"not here")
        except (BrokenPipeError, ConnectionResetError):
            pass


BODIES = {}
_server = []
_server_lock = threading.Lock()


def http_base():
    """The misbehaving server's base URL, started at the first call."""
    with _server_lock:
        if not _server:
            srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
            srv.daemon_threads = True
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            _server.append("http://127.0.0.1:%d" % srv.server_address[1])
        return _server[0]


def substitute(text, scratch):
    if "$HTTP" in text:
        text = text.replace("$HTTP", http_base())
    return text.replace("$SCRATCH", scratch)


def make_files(root, files):
    for rel, what in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(what, str):
            what = substitute(what, root).encode()
        if isinstance(what, bytes):
            with open(path, "wb") as f:
                f.write(what)
        elif what[0] == "fifo":
            os.mkfifo(path)
        elif what[0] == "dir":
            os.makedirs(path, exist_ok=True)
        elif what[0] == "link":
            os.symlink(what[1], path)
        elif what[0] == "copy":
            src = what[1] if os.path.isabs(what[1]) else os.path.join(os.environ["srcdir"], what[1])
            (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, path)
        elif what[0] == "mode":
            with open(path, "wb") as f:
                f.write(what[2].encode() if isinstance(what[2], str) else what[2])
            os.chmod(path, what[1])
        else:
            raise ValueError("%s: unknown file kind %r" % (rel, what))


def trimmable_bytes(path, name):
    """A run's logs, which a resume cuts back to the checkpoint it starts from (the steps after
    it are trained and logged again, so none is held twice): their bytes, to tell a cut from a
    change. None for every other file."""
    if name == "metrics.jsonl" or name.startswith("events.out.tfevents."):
        with open(path, "rb") as f:
            return f.read()
    return None


def trimmed(was, now):
    """now is was cut back: the same file, a prefix of its old bytes."""
    return was[0] == now[0] == "file" and was[3] is not None and now[3] is not None and was[3].startswith(now[3])


def snapshot(root):
    """Every entry under root: its kind and, for files, a hash of the bytes; links not followed."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
                seen[rel] = ("file", h.hexdigest(), st.st_ino, trimmable_bytes(path, name))
            elif stat.S_ISLNK(st.st_mode):
                seen[rel] = ("link", os.readlink(path), st.st_ino)
            else:
                seen[rel] = (stat.S_IFMT(st.st_mode), "", st.st_ino)
    return seen


def halfwritten(root):
    """Temporaries a writer leaves when it stops midway. (A download's NAME.part in the cache is
    not one: trainrun-dataset(5) keeps it for the next fetch to resume.)"""
    left = []
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            if name.endswith(".tmp") or ".tmp." in name or name.startswith(".tmp"):
                left.append(os.path.relpath(os.path.join(dirpath, name), root))
    return left


def case_env(case, scratch, shared_cache):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINRUN_")}
    cache = os.path.join(scratch, ".cache")
    if not os.path.exists(os.path.join(cache, "trainrun")):
        shutil.copytree(shared_cache, os.path.join(cache, "trainrun"), symlinks=True)
    env.update({"HOME": os.path.join(scratch, ".home"), "XDG_CACHE_HOME": cache,
                "XDG_CONFIG_HOME": os.path.join(scratch, ".home", ".config"),
                "TRAINRUN_SYSTEM_CONF": os.path.join(scratch, ".home", "system.conf"),
                "TRAINRUN_DATASETS": os.path.join(os.environ["srcdir"], "datasets"),
                "TRAINRUN_DEVICES": os.path.join(os.environ["srcdir"], "etc", "devices.yaml"),
                "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "LC_ALL": "C.UTF-8",
                "TRAINRUN_CALIBRATE_TOLERANCE": "1000000",   # a calibration always settles (tests/lib.sh)
                "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99"})
    os.makedirs(env["HOME"], exist_ok=True)
    with open(env["TRAINRUN_SYSTEM_CONF"], "w"):
        pass
    for k, v in case.env.items():
        env[k] = substitute(v, scratch) if v is not None else None
    return {k: v for k, v in env.items() if v is not None}


def run_case(case, binary, shared_cache, keep):
    res = Result(case)
    scratch = tempfile.mkdtemp(prefix="hostile-", dir=os.environ.get("TMPDIR", "/tmp"))
    try:
        make_files(scratch, case.files)
        env = case_env(case, scratch, shared_cache)
        if case.setup:
            case.setup(scratch, env, binary)
        before = snapshot(scratch)
        argv = [binary if a == "TR" else substitute(a, scratch) for a in case.argv]
        start = time.monotonic()
        p = subprocess.Popen(argv, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.PIPE if case.stdin is not None else subprocess.DEVNULL,
                             start_new_session=True)
        if case.signal:
            threading.Timer(case.signal[1], lambda: p.poll() is None and p.send_signal(case.signal[0])).start()
        try:
            out, err = p.communicate(case.stdin, timeout=case.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            res.hang = True
            res.problems.append("hang: still running after %d s" % case.timeout)
        res.seconds = time.monotonic() - start
        res.rc, res.out, res.err = p.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        judge(case, res, scratch, before)
        if case.check and not res.hang:
            res.problems += case.check(scratch, res) or []
    except Exception as e:   # a broken case is a failed case, never a crash of the suite
        res.problems.append("the case itself failed: %r" % e)
    finally:
        if keep and res.problems:
            res.problems.append("scratch kept: " + scratch)
        else:
            subprocess.run(["chmod", "-R", "u+rwx", scratch], stderr=subprocess.DEVNULL)
            shutil.rmtree(scratch, ignore_errors=True)
    return res


def judge(case, res, scratch, before):
    p = res.problems
    expected = case.rc if isinstance(case.rc, tuple) else (case.rc,)
    if res.rc is not None and res.rc < 0 and not res.hang and (not case.signal or -res.rc != case.signal[0]):
        res.crash = True
        p.append("killed by signal %d" % -res.rc)
    if any(m in res.err for m in SANITIZER_MARKS):
        res.crash = True
        p.append("sanitizer report")
    if not res.hang and res.rc not in expected:
        p.append("exit status %s, expected %s" % (res.rc, "/".join(map(str, expected))))
    for needle in case.names:
        if substitute(needle, scratch) not in res.err:
            p.append("stderr does not name %r" % needle)
    for needle in case.not_in:
        if needle in res.out or needle in res.err:
            p.append("output holds %r" % needle)
    if case.controls:
        raw = [c for c in res.err if ord(c) < 0x20 and c not in "\n\t" or ord(c) == 0x7f]
        if raw:
            p.append("stderr echoes %d raw control characters" % len(raw))
    after = snapshot(scratch)
    for rel, was in before.items():
        if any(rel == c or rel.startswith(c.rstrip("/") + "/") for c in case.changes):
            continue
        now = after.get(rel)
        if now is not None and trimmed(was, now):
            continue
        if now is None and after.get(rel + ".damaged", (None, None))[:2] == was[:2]:
            continue   # a damaged checkpoint set aside by resume, its bytes kept (trainrun(1), resume)
        if now is None or now[:2] != was[:2]:   # kind and content; a directory's inode may change
            res.lost = True
            p.append("data lost: %s %s" % (rel, "vanished" if now is None else "changed"))
    for rel in halfwritten(scratch):
        if rel not in before:
            res.lost = True
            p.append("half-written file left: " + rel)
    for rel in case.absent:
        if os.path.lexists(os.path.join(scratch, rel)):
            p.append("%s exists afterwards" % rel)


def load_cases(families):
    cases = []
    for fam in families:
        cases += importlib.import_module("cases_" + fam).CASES
    ids = [c.id for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        sys.exit("hostile.py: cases named twice: %s" % ", ".join(sorted(dup)))
    return cases


def calibrated_cache(binary):
    """One calibration for every case (each copies it), so that plan does not measure the host 300 times."""
    cache = tempfile.mkdtemp(prefix="hostile-cache-")
    # any spread settles (as tests/lib.sh has it): a loaded machine's calibration would exit 9
    # and cache nothing, and every case would calibrate again
    env = dict(os.environ, XDG_CACHE_HOME=cache, OMP_NUM_THREADS="1", TRAINRUN_CALIBRATE_TOLERANCE="1000000")
    subprocess.run([binary, "calibrate"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.makedirs(os.path.join(cache, "trainrun"), exist_ok=True)
    return os.path.join(cache, "trainrun")


def main(args):
    quick_only = "--all" not in args
    jobs, families, names, verbose = 4, FAMILIES, [], "--verbose" in args
    i = 0
    while i < len(args):
        if args[i] == "--jobs":
            jobs, i = int(args[i + 1]), i + 1
        elif args[i] == "--family":
            families, i = args[i + 1].split(","), i + 1
        elif not args[i].startswith("--"):
            names.append(args[i])
        i += 1
    binary = os.path.abspath(os.environ["TRAINRUN"])
    cases = [c for c in load_cases(families) if (not quick_only or c.quick) and
             (not names or any(c.id.startswith(n) for n in names))]
    if "--list" in args:
        for c in cases:
            print(c.id, "(after %s)" % c.after if c.after else "")
        return 0
    shared = calibrated_cache(binary)
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for res in pool.map(lambda c: run_case(c, binary, shared, "--keep" in args), cases):
            results.append(res)
            if res.problems:
                wait = " [expected to pass after merge of %s]" % res.case.after if res.case.after else ""
                print("FAIL %s%s: %s" % (res.case.id, wait, "; ".join(res.problems)))
                if verbose:
                    print("  stderr: " + res.err.strip().replace("\n", "\n          ")[:2000])
            elif verbose:
                print("ok   %s (%.1f s)" % (res.case.id, res.seconds))
    shutil.rmtree(os.path.dirname(shared), ignore_errors=True)
    print("\n%-12s %6s %6s %6s %8s %6s %10s" % ("family", "cases", "passed", "failed", "crashes", "hangs",
                                              "data lost"))
    total = [0] * 6
    for fam in families + ["total"]:
        rs = [r for r in results if fam == "total" or r.case.family == fam]
        row = [len(rs), sum(not r.problems for r in rs), sum(bool(r.problems) for r in rs),
               sum(r.crash for r in rs), sum(r.hang for r in rs), sum(r.lost for r in rs)]
        if rs:
            print("%-12s %6d %6d %6d %8d %6d %10d" % tuple([fam] + row))
    pending = sorted({r.case.after for r in results if r.problems and r.case.after})
    if pending:
        print("failed cases waiting for a branch: " + ", ".join(
            "%s %d" % (b, sum(1 for r in results if r.problems and r.case.after == b)) for b in pending))
    return 1 if any(r.problems for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
