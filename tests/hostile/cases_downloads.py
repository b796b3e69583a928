"""Hostile downloads, from a server in the suite (hostile.Misbehaving) that answers errors,
loops, endless or cut bodies, stalls, lies about lengths, and from URLs that carry
credentials: each fails with exit 4 naming the URL (its credentials as ***), within its
timeout, leaving no partial file in the download cache and the cached copies of earlier
downloads as they were."""
import hostile
from common import Case, TRAIN_CSV, tiny_recipe

F = "downloads"
CASES = []
hostile.BODIES["train.csv"] = TRAIN_CSV.encode()
hostile.BODIES["html"] = b"<html><body>Login required</body></html>\n"
QUICK = {"TRAINRUN_FETCH_RETRIES": "0", "TRAINRUN_FETCH_BACKOFF": "0", "TRAINRUN_FETCH_TIMEOUT": "5"}


def fetch(name, url, rc=4, needles=None, env=None, after=None, timeout=45, quick=True, not_in=(), sha=None):
    """Plans the tiny recipe on data set 'web', whose train split is url (a definition, so that
    any URL may be given, query and all)."""
    e = dict(QUICK, TRAINRUN_DATASETS="$SCRATCH/ds")
    e.update(env or {})
    source = "{source: '%s'%s}" % (url, ", sha256: " + sha if sha else "")
    definition = "name: web\nformat: csv\nheader: none\nlabel: last\ntrain: %s\n" % source
    CASES.append(Case(F, name, ["TR", "plan", "r.yaml"], rc,
                      names=tuple(needles if needles is not None else [url.split("?")[0]]),
                      files={"r.yaml": tiny_recipe(data="  dataset: web\n"), "ds/web/dataset.yaml": definition},
                      env=e, after=after, timeout=timeout, quick=quick, not_in=not_in, absent=("runs",)))


fetch("ok", "$HTTP/ok/train.csv", rc=0, needles=[])
for status in (400, 401, 403, 404, 410, 418, 429, 500, 502, 503):
    fetch("status-%d" % status, "$HTTP/status/%d/train.csv" % status, needles=["$HTTP/status/%d" % status,
                                                                               str(status)])
fetch("status-503-retried", "$HTTP/status/503/train.csv", env={"TRAINRUN_FETCH_RETRIES": "2"}, timeout=60)
fetch("redirect-loop", "$HTTP/redirect-loop")
fetch("redirect-to-ftp", "$HTTP/redirect-ftp")
fetch("connection-refused", "http://127.0.0.1:9/x.csv")
fetch("unresolvable-host", "http://no-such-host.invalid/x.csv")
fetch("bad-port", "http://127.0.0.1:99999/x.csv", rc=(2, 4))
fetch("cut-body", "$HTTP/short")
fetch("stall", "$HTTP/stall", env={"TRAINRUN_FETCH_TIMEOUT": "2"}, timeout=30)
fetch("huge-content-length", "$HTTP/huge-length")
fetch("html-instead-of-csv", "$HTTP/ok/html", needles=[])
fetch("sha-mismatch", "$HTTP/ok/train.csv", sha="b" * 64, needles=["$HTTP/ok/train.csv", "b" * 64])
fetch("endless-capped", "$HTTP/endless", env={"TRAINRUN_FETCH_MAX_BYTES": "1000000"}, needles=["$HTTP/endless",
                                                                                               "TRAINRUN_FETCH_MAX_BYTES"])
# No cap given: the documented default cap must end it (the fetch branch adds one), long
# before a disk fills.
fetch("endless-default-cap", "$HTTP/endless", timeout=300, quick=False, after="fetch")
# Credentials never printed: user:password@ and secret query parameters become ***.
fetch("credentials-userinfo", "http://alice:hunter2@127.0.0.1:9/x.csv", needles=["***"], not_in=("hunter2",),
      after="fetch")
for param in ("token", "key", "password", "secret", "signature", "sig", "access_token", "api_key", "TOKEN"):
    fetch("credentials-query-" + param.lower() + ("-upper" if param.isupper() else ""),
          "$HTTP/status/404/x.csv?%s=s3cr3tvalue&page=2" % param, needles=["***"], not_in=("s3cr3tvalue",),
          after="fetch")
fetch("credentials-sha-mismatch", "http://bob:pa55word@127.0.0.1:1/x.csv", not_in=("pa55word",), needles=["***"],
      after="fetch")
# Environment values that are not numbers are refused, not silently remapped.
for var, value in (("TRAINRUN_FETCH_RETRIES", "abc"), ("TRAINRUN_FETCH_RETRIES", "-1"),
                   ("TRAINRUN_FETCH_TIMEOUT", "soon"), ("TRAINRUN_FETCH_BACKOFF", "1e999"),
                   ("TRAINRUN_FETCH_MAX_BYTES", "lots")):
    fetch("env-%s=%s" % (var, value), "$HTTP/ok/train.csv", rc=2, env={var: value}, needles=[var], after="fetch")
