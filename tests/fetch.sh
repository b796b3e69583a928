#!/bin/sh
# The nightly data refresh as a cron job meets it, against a server on 127.0.0.1 (tests/httpd.py):
# a data set whose file is a URL is downloaded once, then asked after with its ETag (304) and not
# downloaded again; a changed file is downloaded and trained on; --if-data-changed skips training
# (exit 7) while nothing changed; a wrong pinned sha256 is a data error (exit 4) that leaves the
# cache as it was; 503s are retried, a cut download resumes with a Range (206), in the same run
# or the next, a stalled one times out and is retried; a recipe's inline source may be a URL;
# file:// works, ftp:// is refused, and a definition in the download cache may not name a
# prepare script; an endless body stops at data.max_download (the recipe's or a conf file's),
# an endless error page is cut; a URL's credentials show nowhere; SIGTERM, SIGINT and SIGHUP
# end a download or a retry's wait with exit 130; progress shows on a terminal, in plain lines
# otherwise, not with --quiet; an invalid TRAINRUN_FETCH_RETRIES is refused (exit 2).
. "$srcdir/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 runs the test's HTTP server"; exit 77; }
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
NO_PROXY=127.0.0.1 no_proxy=127.0.0.1 TRAINRUN_FETCH_BACKOFF=0.1 TRAINRUN_FETCH_TIMEOUT=2
export NO_PROXY no_proxy TRAINRUN_FETCH_BACKOFF TRAINRUN_FETCH_TIMEOUT
TRAINRUN_DATASETS=$scratch/datasets
export TRAINRUN_DATASETS
downloads=$XDG_CACHE_HOME/trainrun/downloads
mkdir -p "$scratch/www" "$scratch/datasets"
cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/iris.csv"

python3 "$srcdir/tests/httpd.py" "$scratch/www" "$scratch/port" "$scratch/log" "$scratch/control" \
  2>"$scratch/httpd.err" &
server=$!
trap 'kill "$server" 2>/dev/null; rm -rf "$scratch"' EXIT
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  [ -s "$scratch/port" ] && break
  sleep 0.5
done
[ -s "$scratch/port" ] || { echo "FAIL: the test's HTTP server did not start: $(cat "$scratch/httpd.err")"; exit 1; }
url=http://127.0.0.1:$(cat "$scratch/port")

# define NAME SOURCE [LINE]: datasets/NAME/dataset.yaml, the iris definition reading SOURCE,
# with LINE (a sha256: pin, a prepare:) added.
define() {
  mkdir -p "$scratch/datasets/$1"
  cat >"$scratch/datasets/$1/dataset.yaml" <<YAML
name: $1
source: $2
format: csv
header: sklearn
label: last
num_classes: 3
class_names: [setosa, versicolor, virginica]
split: {valid: 0.1, test: 0.2, seed: 0}
normalize: standardize
${3:-}
YAML
}
# train NAME [OPTION...]: five steps of the MLP on data set NAME, runs under $scratch/runs.
train() {
  name=$1
  shift
  : >"$scratch/log"
  run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" data.dataset="$name" train.steps=5 train.eval_every=5 \
    train.checkpoint_every=0 data.num_workers=0 report.dir="$scratch/runs" "$@"
  log=$(cat "$scratch/log")
}
statuses() { echo "$log" | awk '{print $3}' | tr '\n' ' '; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
recorded() { grep -o '"sha256": "[0-9a-f]*"' "$scratch/runs/mlp/latest/data-sources.json" | cut -d'"' -f4; }
runs() { ls "$scratch/runs/mlp" | grep -c '^[0-9]'; }
# The cached copy of a URL, by the name the cache gives it.
cached() { ls "$downloads"/*-"$1" 2>/dev/null | head -n 1; }

define remote "$url/iris.csv"

# The first run downloads the file, keeps it and its metadata, and records it in the run folder.
train remote
expect_rc 0 "the first run"
expect_in "$(statuses)" "200" "the first run downloads"
copy=$(cached iris.csv)
checks=$((checks + 1))
cmp -s "$copy" "$scratch/www/iris.csv" || fail "the download cache holds no copy of iris.csv: $(ls -l "$downloads")"
checks=$((checks + 1))
[ -z "$(find "$downloads" -type f -perm /111)" ] || fail "a download is executable: $(ls -l "$downloads")"
expect_in "$(cat "$copy.json")" "\"url\": \"$url/iris.csv\"" "the metadata names the URL"
expect_in "$(cat "$copy.json")" "\"etag\": \"\\\"$(sha "$scratch/www/iris.csv")\\\"\"" "the metadata keeps the ETag"
expect_in "$(cat "$copy.json")" "\"sha256\": \"$(sha "$scratch/www/iris.csv")\"" "the metadata keeps the sha256"
expect_in "$(recorded)" "$(sha "$scratch/www/iris.csv")" "data-sources.json records the sha256"
expect_in "$(cat "$scratch/runs/mlp/latest/data-sources.json")" "\"source\": \"$url/iris.csv\"" \
  "data-sources.json records the URL"

# The second asks with the ETag and gets 304: nothing downloaded, the copy untouched.
before=$(stat -c '%i %Y %s' "$copy")
train remote
expect_rc 0 "the second run"
checks=$((checks + 1))
[ "$(statuses)" = "304 " ] || fail "the second run should get one 304, the server saw: $log"
expect_in "$log" "if-none-match=\"$(sha "$scratch/www/iris.csv")\"" "the second run sends the ETag"
checks=$((checks + 1))
[ "$(stat -c '%i %Y %s' "$copy")" = "$before" ] || fail "a 304 rewrote the cached copy"

# --if-data-changed: nothing changed since the last good run, so no training and exit 7.
n=$(runs)
train remote --if-data-changed
expect_rc 7 "--if-data-changed, nothing changed"
expect_in "$out" "mlp: no data source changed since $scratch/runs/mlp/" "--if-data-changed says why"
checks=$((checks + 1))
[ "$(runs)" = "$n" ] || fail "--if-data-changed made a run folder though nothing changed"

# A changed file is downloaded again (200) and trained on, --if-data-changed or not.
sed 's/^5.1,3.5,1.4,0.2,0$/5.2,3.5,1.4,0.2,0/' "$srcdir/datasets/iris/iris.csv" >"$scratch/www/iris.csv"
train remote --if-data-changed
expect_rc 0 "--if-data-changed, the file changed"
expect_in "$(statuses)" "200" "a changed file is downloaded"
checks=$((checks + 1))
[ "$(runs)" = "$((n + 1))" ] || fail "--if-data-changed did not train on changed data"
checks=$((checks + 1))
cmp -s "$copy" "$scratch/www/iris.csv" || fail "the cached copy is not the changed file"
expect_in "$(recorded)" "$(sha "$scratch/www/iris.csv")" "the run records the changed file's sha256"
train remote --if-data-changed
expect_rc 7 "--if-data-changed after the changed file was trained on"
expect_in "$(statuses)" "304" "--if-data-changed asks with the ETag"

# A run reads the data it began with: resume refuses (exit 4) once a file changed since, and
# --resume auto starts a new run rather than continue an interrupted one on other data.
newest=$(ls -d "$scratch"/runs/mlp/2* | tail -n 1)
sed 's/^5.1,3.5,1.4,0.2,0$/5.3,3.5,1.4,0.2,0/' "$srcdir/datasets/iris/iris.csv" >"$scratch/www/iris.csv"
run "$TRAINRUN" resume "$newest" --quiet
expect_rc 4 "resume after its data changed"
expect_in "$err" "the data changed since this run began ($url/iris.csv differs" "resume names the changed file"
sed -i '0,/"exit_code": 0/s//"exit_code": 130/' "$newest/run.json"   # as if stopped by a signal
n=$(runs)
train remote --resume auto
expect_rc 0 "--resume auto after the data changed"
expect_in "$out" "was interrupted, but its data changed since it began ($url/iris.csv); starting a new run" \
  "--resume auto says why it does not continue"
checks=$((checks + 1))
[ "$(runs)" = "$((n + 1))" ] || fail "--resume auto did not start a new run on the changed data"
expect_in "$(recorded)" "$(sha "$scratch/www/iris.csv")" "the new run records the changed file"

# A failed run is no reference: its data is not "trained on".
mkdir -p "$scratch/runs/mlp/99991231-235959"
printf '{"exit_code": 5}\n' >"$scratch/runs/mlp/99991231-235959/run.json"
cp "$scratch/runs/mlp/latest/data-sources.json" "$scratch/runs/mlp/99991231-235959/"
train remote --if-data-changed
expect_rc 7 "a newer failed run is passed over for the last good one"
rm -rf "$scratch/runs/mlp/99991231-235959"

# A pinned sha256 that the server's file does not have: exit 4, the cache as it was.
define pinned "$url/iris.csv" "sha256: $(sha "$srcdir/datasets/iris/iris.csv")"
before=$(cd "$downloads" && md5sum ./*)
train pinned
expect_rc 4 "a wrong pinned sha256"
expect_in "$err" "$url/iris.csv: sha256 mismatch: expected $(sha "$srcdir/datasets/iris/iris.csv")" \
  "the mismatch names the URL and the expected hash"
expect_in "$err" "got $(sha "$scratch/www/iris.csv")" "the mismatch names the actual hash"
expect_in "$err" "datasets/pinned/dataset.yaml:10:9" "the mismatch names the pin"
checks=$((checks + 1))
[ "$(cd "$downloads" && md5sum ./*)" = "$before" ] || fail "a mismatch changed the cache: $before, then $(cd "$downloads" && md5sum ./*)"
# Pinned right, the copy is used as it is.
define pinned "$url/iris.csv" "sha256: $(sha "$scratch/www/iris.csv")"
train pinned
expect_rc 0 "a right pinned sha256"
expect_in "$(statuses)" "304" "a right pin keeps the cached copy"

# 503 twice: retried with backoff, then downloaded.
cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/retry.csv"
define retry "$url/retry.csv"
echo '{"fail": 2, "status": 503}' >"$scratch/control"
train retry
expect_rc 0 "two 503s"
checks=$((checks + 1))
[ "$(statuses)" = "503 503 200 " ] || fail "503s should be retried: $log"
expect_in "$err" "trainrun: warning: $url/retry.csv: HTTP 503; retrying in 0.1 s (retry 1 of 4)" "a retry is said"

# 404 is not retried.
define missing "$url/nowhere.csv"
train missing
expect_rc 4 "a 404"
checks=$((checks + 1))
[ "$(statuses)" = "404 " ] || fail "a 404 should not be retried: $log"
expect_in "$err" "cannot fetch $url/nowhere.csv: HTTP 404" "a 404 is said"

# A download cut after 1000 bytes resumes from there with a Range request.
cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/cut.csv"
define cut "$url/cut.csv"
echo '{"cut": 1, "cut_after": 1000}' >"$scratch/control"
train cut
expect_rc 0 "a cut download"
expect_in "$log" "GET /cut.csv 206 range=bytes=1000- if-range=\"$(sha "$scratch/www/cut.csv")\"" "a cut download resumes"
checks=$((checks + 1))
cmp -s "$(cached cut.csv)" "$scratch/www/cut.csv" || fail "the resumed download differs from the file"
checks=$((checks + 1))
[ -z "$(ls "$downloads" | grep '\.part')" ] || fail "a part is left over: $(ls "$downloads")"

# A nightly run whose download was cut and not retried leaves the part; the next resumes it.
cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/crash.csv"
define crash "$url/crash.csv"
echo '{"cut": 1, "cut_after": 700}' >"$scratch/control"
TRAINRUN_FETCH_RETRIES=0
export TRAINRUN_FETCH_RETRIES
train crash
unset TRAINRUN_FETCH_RETRIES
expect_rc 4 "a cut download without retries"
expect_in "$err" "cannot fetch $url/crash.csv: transfer closed with" "the cut is said"
checks=$((checks + 1))
[ "$(ls "$downloads" | grep -c 'crash\.csv\.part')" = 2 ] || fail "the part and its validators should stay: $(ls "$downloads")"
train crash
expect_rc 0 "the next run"
expect_in "$log" "GET /crash.csv 206 range=bytes=700-" "the next run resumes the part"
checks=$((checks + 1))
cmp -s "$(cached crash.csv)" "$scratch/www/crash.csv" || fail "the download resumed by the next run differs"

# A server that stalls mid-file: the attempt times out (TRAINRUN_FETCH_TIMEOUT) and is retried.
cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/stall.csv"
define stall "$url/stall.csv"
echo '{"stall": 1, "stall_seconds": 30}' >"$scratch/control"
train stall
expect_rc 0 "a stalled download"
expect_in "$err" "$url/stall.csv: Operation too slow" "a stall is said"
checks=$((checks + 1))
cmp -s "$(cached stall.csv)" "$scratch/www/stall.csv" || fail "the download after a stall differs from the file"

# A recipe's inline data.train.source may be a URL too: fetched once, then 304.
cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/inline.csv"
train ignored '~data.dataset' data.train.source="$url/inline.csv"
expect_rc 0 "an inline URL"
expect_in "$(statuses)" "200" "an inline URL is downloaded"
train ignored '~data.dataset' data.train.source="$url/inline.csv" --if-data-changed
expect_rc 7 "an inline URL, unchanged"
checks=$((checks + 1))
[ "$(statuses)" = "304 " ] || fail "an unchanged inline URL should get one 304: $log"

# A download past TRAINRUN_FETCH_MAX_BYTES (or past what leaves the disk 1 GiB free) fails as a
# data error and keeps nothing of it: the server's Content-Length is refused before a byte.
cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/big.csv"
define capped "$url/big.csv"
TRAINRUN_FETCH_MAX_BYTES=1000 train capped
expect_rc 4 "a file larger than TRAINRUN_FETCH_MAX_BYTES"
expect_in "$err" "bytes or more: more than the cap of 1000 bytes (TRAINRUN_FETCH_MAX_BYTES) allows" "the cap is named"
checks=$((checks + 1))
[ -z "$(ls "$downloads" | grep big.csv | grep -v "\.lock$")" ] || fail "a refused download left files: $(ls "$downloads")"
TRAINRUN_FETCH_MAX_BYTES=$(($(stat -c %s "$scratch/www/big.csv") + 1)) train capped
expect_rc 0 "a file within TRAINRUN_FETCH_MAX_BYTES"
unset TRAINRUN_FETCH_MAX_BYTES   # a shell may keep an assignment made before a function call

# file:// is read in place; ftp:// is refused by name.
define local "file://$scratch/www/iris.csv"
train local
expect_rc 0 "a file:// URL"
expect_in "$(cat "$scratch/runs/mlp/latest/data-sources.json")" "\"source\": \"$scratch/www/iris.csv\"" \
  "a file:// source is recorded"
define ftp "ftp://127.0.0.1:$(cat "$scratch/port")/iris.csv"
train ftp
expect_rc 4 "an ftp:// URL"
expect_in "$err" "datasets/ftp/dataset.yaml:2:9: source: 'ftp://' URLs are not fetched; trainrun fetches https://, http:// and file:// URLs only" \
  "ftp:// is refused"

# Nothing fetched is run: a definition in the download cache may not name a prepare script, nor
# may a definition name a URL or a script that lies in the cache.
mkdir -p "$downloads/evil"
printf 'touch "%s/ran"\n' "$scratch" >"$downloads/evil/prepare"
define evil "$url/iris.csv" "prepare: prepare"
mv "$scratch/datasets/evil/dataset.yaml" "$downloads/evil/dataset.yaml"
TRAINRUN_DATASETS=$downloads
train evil
TRAINRUN_DATASETS=$scratch/datasets
expect_rc 4 "a definition in the download cache with a prepare script"
expect_in "$err" "evil/dataset.yaml:10:10: prepare: $downloads/evil/dataset.yaml lies in trainrun's cache" \
  "a prepare script in the cache is refused"
checks=$((checks + 1))
[ ! -e "$scratch/ran" ] || fail "a prepare script in the download cache was run"
define linked "$url/iris.csv" "prepare: prepare"
ln -s "$downloads/evil/prepare" "$scratch/datasets/linked/prepare"
train linked
expect_rc 4 "a prepare script linked into the cache"
expect_in "$err" "prepare: $scratch/datasets/linked/prepare lies in trainrun's cache" "a linked script is refused"
define fetched "$url/iris.csv" "prepare: $url/prepare"
train fetched
expect_rc 4 "a prepare script at a URL"
expect_in "$err" "prepare: '$url/prepare' is a URL" "a prepare URL is refused"
checks=$((checks + 1))
[ ! -e "$scratch/ran" ] || fail "a fetched prepare script was run"
# An endless body (200, no Content-Length) stops at data.max_download: exit 4 naming the URL and
# the cap, nothing of it kept; the cap may come from a conf file too.
cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/endless.csv"
define endless "$url/endless.csv"
echo '{"endless": 1}' >"$scratch/control"
train endless data.max_download=1MiB
expect_rc 4 "an endless body"
expect_in "$err" "cannot fetch $url/endless.csv: the file has" "the endless body's message names the URL"
expect_in "$err" "more than the cap of 1048576 bytes (data.max_download) allows" "the message names the cap"
checks=$((checks + 1))
[ -z "$(ls "$downloads" | grep endless.csv | grep -v "\.lock$")" ] || fail "an endless body left files: $(ls "$downloads")"
printf 'data:\n  max_download: 2MiB\n' >"$scratch/capped.conf"
echo '{"endless": 1}' >"$scratch/control"
TRAINRUN_CONF=$scratch/capped.conf train endless
expect_rc 4 "an endless body, the cap from a conf file"
expect_in "$err" "more than the cap of 2097152 bytes (data.max_download) allows" "the conf file's cap"
unset TRAINRUN_CONF
run "$TRAINRUN" check "$srcdir/recipes/mlp.yaml"
expect_in "$out" "max_download: 4GiB" "the default cap"

# An endless error page is cut too, and its status is what fails the download.
echo '{"fail": 1, "status": 404, "body": "endless"}' >"$scratch/control"
started=$(date +%s)
train endless
took=$(($(date +%s) - started))
expect_rc 4 "an endless error page"
expect_in "$err" "cannot fetch $url/endless.csv: HTTP 404" "the endless error page's status"
checks=$((checks + 1))
[ "$took" -lt 15 ] || fail "an endless error page held the run $took s (the server gives up after 20)"

# Credentials in a URL never show: not in messages, data-sources.json or the cache's metadata
# (which only its owner may read).
port=$(cat "$scratch/port")
define secret "http://bob:hunter2@127.0.0.1:$port/iris.csv?token=T0K3N&v=1"
train secret
expect_rc 0 "a URL with credentials"
shown="http://***@127.0.0.1:$port/iris.csv?token=***&v=1"
expect_in "$(cat "$scratch/runs/mlp/latest/data-sources.json")" "\"source\": \"$shown\"" \
  "data-sources.json names the URL without its credentials"
for word in hunter2 T0K3N bob; do
  checks=$((checks + 1))
  leaks=$(grep -rl "$word" "$downloads" "$scratch/runs/mlp/latest" 2>/dev/null | grep -v '\.csv$')
  [ -z "$leaks" ] || fail "'$word' of the URL is written in: $leaks"
done
checks=$((checks + 1))
[ -z "$(find "$downloads" -name '*.json' ! -perm 600)" ] || fail "cache metadata readable by others: $(ls -l "$downloads")"
define secret404 "http://bob:hunter2@127.0.0.1:$port/nowhere.csv?sig=S1G&v=1"
train secret404
expect_rc 4 "a missing file at a URL with credentials"
expect_in "$err" "cannot fetch http://***@127.0.0.1:$port/nowhere.csv?sig=***&v=1: HTTP 404" "the message redacts the URL"
for word in hunter2 S1G bob; do
  expect_not_in "$err" "$word" "the message shows the URL's '$word'"
done

# A signal during a download (or the wait before a retry) ends it within a second or two: exit
# 130, the URL named, the part kept for the next run to resume; --if-data-changed's refresh too.
for case in TERM INT HUP refresh; do
  sig=$case changed=
  [ "$case" = refresh ] && sig=TERM changed=--if-data-changed
  file=slow-$case.csv
  cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/$file"
  define "slow$case" "$url/$file"
  echo '{"slow": 1, "slow_seconds": 60}' >"$scratch/control"
  : >"$scratch/log"
  "$TRAINRUN" "$srcdir/recipes/mlp.yaml" data.dataset="slow$case" train.steps=5 data.num_workers=0 \
    report.dir="$scratch/runs" $changed >"$scratch/sig.out" 2>"$scratch/sig.err" &
  pid=$!
  i=0
  while ! grep -q "$file" "$scratch/log" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  sleep 1
  t0=$(date +%s)
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  took=$(($(date +%s) - t0))
  err=$(cat "$scratch/sig.err")
  expect_rc 130 "SIG$sig during a download ($case)"
  expect_in "$err" "fetching $url/$file: stopped by signal" "SIG$sig ($case): the message names the URL"
  checks=$((checks + 1))
  [ "$took" -le 5 ] || fail "SIG$sig during a download ($case): trainrun took $took s to end"
done
echo '{"fail": 1, "status": 503}' >"$scratch/control"
TRAINRUN_FETCH_BACKOFF=60 "$TRAINRUN" "$srcdir/recipes/mlp.yaml" data.dataset=slowTERM train.steps=5 \
  data.num_workers=0 report.dir="$scratch/runs" >"$scratch/sig.out" 2>"$scratch/sig.err" &
pid=$!
i=0
while ! grep -q "retrying in 60 s" "$scratch/sig.err" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -TERM "$pid"
wait "$pid"
rc=$?
err=$(cat "$scratch/sig.err")
expect_rc 130 "SIGTERM while waiting to retry"
expect_in "$err" "stopped by signal 15 (Terminated) while waiting to retry" "the wait is cut short"

# Progress: plain lines when stderr is no terminal, one line redrawn on a terminal, none with
# --quiet.
for how in plain tty quiet; do
  cp "$srcdir/datasets/iris/iris.csv" "$scratch/www/progress-$how.csv"
  define "progress$how" "$url/progress-$how.csv"
  echo '{"slow": 1, "slow_seconds": 7}' >"$scratch/control"
  case $how in
    plain) train "progress$how"; shown=$err ;;
    quiet) train "progress$how" --quiet; shown=$err ;;
    tty)
      if ! command -v script >/dev/null 2>&1; then
        echo '{}' >"$scratch/control"
        continue
      fi
      shown=$(script -qec "\"$TRAINRUN\" \"$srcdir/recipes/mlp.yaml\" data.dataset=progresstty train.steps=5 \
        data.num_workers=0 report.dir=\"$scratch/runs\" >/dev/null" /dev/null | tr '\r\033' '#@')
      rc=0 ;;
  esac
  expect_rc 0 "a slow download ($how)"
  case $how in
    plain)
      expect_in "$shown" "trainrun: fetching $url/progress-plain.csv: " "a plain progress line"
      expect_in "$shown" "trainrun: fetched $url/progress-plain.csv: " "the plain last line"
      expect_not_in "$shown" "$(printf '\r')" "no carriage return without a terminal" ;;
    tty)
      expect_in "$shown" "#@[Ktrainrun: fetching $url/progress-tty.csv: " "a line redrawn on a terminal" ;;
    quiet) expect_not_in "$shown" "fetching" "--quiet shows no progress" ;;
  esac
done

# An invalid TRAINRUN_FETCH_RETRIES is refused before anything runs, not remapped.
for value in -1 abc 2.5 101; do
  TRAINRUN_FETCH_RETRIES=$value train remote
  expect_rc 2 "TRAINRUN_FETCH_RETRIES=$value"
  expect_in "$err" "TRAINRUN_FETCH_RETRIES=$value: not a whole number from 0 to 100" "the variable, value and range"
done
unset TRAINRUN_FETCH_RETRIES
finish
