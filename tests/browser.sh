#!/bin/sh
# The HTML reports as a person opens them, in headless Chromium: after a few short runs, the
# newest report.html shows its title, plots, tables, warnings and the program drawn (graph.svg
# inline, or linked when over 500 kB), loads nothing from the network and fits a phone's width;
# the runs' index.html has a table of runs per recipe and a trend per recipe run twice or more. Desktop and phone screenshots are kept, in $SCREENSHOTS
# or else tests/screenshots/ under the build folder, for a person to look at. Skipped (77)
# where chromium is not installed; scripts/setup installs it, so CI runs it.
. "$srcdir/tests/lib.sh"

chromium=$(command -v chromium || command -v chromium-browser) || {
  echo "SKIP: chromium is not installed (scripts/setup installs it)"
  exit 77
}
shots=${SCREENSHOTS:-${top_builddir:-.}/tests/screenshots}
mkdir -p "$shots"

# browser ARGS...: headless Chromium, its chatter (D-Bus, GPU, fonts) kept out of the way in
# chrome.log. Root in a container needs --no-sandbox; /dev/shm there is often 64 MiB.
browser() {
  timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage \
    --hide-scrollbars --user-data-dir="$scratch/chrome" "$@" 2>>"$scratch/chrome.log"
}

# dom FILE: the page's DOM after Chromium parsed it, on one line (in $out).
dom() {
  out=$(browser --dump-dom "file://$1" | tr '\n' ' ')
}

# count TEXT NEEDLE: how many times the fixed string NEEDLE occurs in TEXT.
count() {
  printf '%s' "$1" | grep -oF "$2" | wc -l
}

expect_count() {
  checks=$((checks + 1))
  [ "$(count "$1" "$2")" -eq "$3" ] || fail "$4: '$2' $(count "$1" "$2") times, expected $3"
}

# self_contained TEXT DIR WHAT: no URL that reaches out (http:, https:, //host) in an src, href
# or CSS url(), and every relative link names a file that exists under DIR.
self_contained() {
  checks=$((checks + 1))
  remote=$(printf '%s' "$1" | grep -oiE "(src|href)=[\"']?(https?:|//)[^\"' >]*|url\([\"']?(https?:|//)[^)]*|@import" | head -n 3)
  [ -z "$remote" ] || fail "$3 loads from the network: $remote"
  for link in $(printf '%s' "$1" | grep -oE 'href="[^"#:]+"' | sed 's/^href="//; s/"$//'); do
    checks=$((checks + 1))
    [ -e "$2/$link" ] || fail "$3 links to $link, which does not exist"
  done
}

# screenshot NAME FILE WIDTH: a WIDTH × 2400 screenshot of FILE, kept as NAME.png; it must be a
# PNG of that width, over 10 kB, and 4 kB more than an empty page's at that width (a blank
# 1280 × 2400 screenshot alone takes 14 kB).
screenshot() {
  png=$scratch/$1.png
  [ -s "$scratch/blank-$3.png" ] ||
    browser --screenshot="$scratch/blank-$3.png" --window-size="$3,2400" "file://$scratch/blank.html" >/dev/null
  browser --screenshot="$png" --window-size="$3,2400" "file://$2" >/dev/null
  cp "$png" "$shots/$1.png" 2>/dev/null
  checks=$((checks + 1))
  if [ ! -s "$png" ]; then
    fail "$1: no screenshot of $2"
    return
  fi
  [ "$(od -An -tx1 -N8 "$png" | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$1: not a PNG"
  size=$(wc -c <"$png")
  blank=$(wc -c <"$scratch/blank-$3.png" 2>/dev/null || echo 0)
  [ "$size" -gt 10240 ] && [ "$size" -gt $((blank + 4096)) ] ||
    fail "$1: $size bytes, an empty page takes $blank: is it blank?"
  # IHDR: the width is the big-endian 32-bit number at bytes 16 to 19.
  width=$(od -An -tu1 -j16 -N4 "$png" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }')
  [ "$width" = "$3" ] || fail "$1: $width pixels wide, the window was $3"
}
printf '<!DOCTYPE html>\n<html><body></body></html>\n' >"$scratch/blank.html"

# fits_phone NAME FILE: FILE in a 390-pixel iframe (an iPhone's CSS width) scrolls no wider than
# the frame. The page itself has no script; the frame around it measures it.
fits_phone() {
  cat >"$scratch/$1-frame.html" <<EOF
<!DOCTYPE html>
<html><body style="margin:0">
<iframe id="page" src="file://$2" width="390" height="2400" style="border:0"></iframe>
<pre id="result">not measured</pre>
<script>
document.getElementById('page').addEventListener('load', function () {
  var out = document.getElementById('result');
  try {
    var doc = this.contentDocument, width = doc.documentElement.clientWidth, wide = [];
    doc.querySelectorAll('body *').forEach(function (e) {
      if (e.getBoundingClientRect().right > width + 0.5 || (e.clientWidth && e.scrollWidth > e.clientWidth + 1))
        wide.push(e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined ? '.' + e.className : ''));
    });
    out.textContent = (doc.documentElement.scrollWidth > width ? 'overflow: ' : 'fits: ') + width +
      ' wide, scrolls ' + doc.documentElement.scrollWidth + ' ' + wide.slice(0, 8).join(' ');
  } catch (e) { out.textContent = 'cannot measure: ' + e; }
});
</script>
</body></html>
EOF
  out=$(browser --allow-file-access-from-files --virtual-time-budget=5000 --dump-dom \
    "file://$scratch/$1-frame.html" | grep -o '<pre id="result">[^<]*')
  out=${out#*>}
}

# ---- a few short runs: three of one recipe, one of another ----------------------------------
for i in 1 2 3; do
  run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=30 train.eval_every=10 report.dir="$scratch/runs" --quiet
  expect_rc 0 "mlp run $i"
done
run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" name=mlp-wide model.hidden=128 train.steps=30 train.eval_every=10 \
  report.dir="$scratch/runs" --quiet
expect_rc 0 "the mlp-wide run"
report=$(cd "$scratch/runs/mlp/latest" 2>/dev/null && pwd -P)/report.html

# ---- the newest run's report.html, as Chromium parses it ---------------------------------------
dom "$report"
expect_in "$out" "<title>mlp: finished</title>" "the title names the recipe and the status"
expect_in "$out" '<meta name="viewport" content="width=device-width, initial-scale=1">' "the viewport meta"
expect_in "$out" "<h1>mlp: <span class=\"finished\">finished</span></h1>" "the heading"
checks=$((checks + 1))
[ "$(count "$out" '<svg class="plot"')" -ge 2 ] || fail "fewer than 2 plots"
expect_in "$out" "<title>Loss</title>" "the loss plot"
expect_in "$out" "<title>Learning rate</title>" "the learning-rate plot"
checks=$((checks + 1))
[ "$(count "$out" '<polyline')" -ge 3 ] || fail "fewer than 3 lines drawn (train and eval loss, lr)"
expect_in "$out" "<h2>Metrics</h2> <table class=\"metrics\">" "the Metrics table"
expect_in "$out" "<td>eval/accuracy</td>" "the Metrics table's rows"
expect_in "$out" "<h2>Plan and memory checklist</h2> <table class=\"plan\">" "the Plan table"
expect_in "$out" "<td>Leak check</td><td>constant after warm-up</td>" "the leak check"
expect_in "$out" "<h2>Compared with " "the comparison with the run before"
expect_in "$out" "<title>Where the time went</title>" "the time breakdown"
expect_in "$out" "<title>Activations over one micro-step" "the memory timeline"
expect_in "$out" "<table class=\"largest\">" "the largest tensors"
expect_in "$out" "<table class=\"environment\">" "the environment"
expect_in "$out" "<td>AMP</td><td>off (fp32)</td>" "the Plan table's rows"
expect_in "$out" "<h2>Warnings</h2> <p class=\"none\">No warnings.</p>" "the Warnings section"
expect_not_in "$out" "<script" "report.html runs no script"
self_contained "$out" "$(dirname "$report")" "report.html"

# ---- the program drawn (graph.svg, by Graphviz) in the page, or linked when too big ------------
expect_in "$out" "<h2>Program</h2>" "the Program section"
expect_in "$out" '<div class="graph"><svg ' "graph.svg inline"
expect_in "$out" '<g id="graph0" class="graph"' "Graphviz's drawing"
expect_in "$out" "matmul" "the program's ops in the drawing"
checks=$((checks + 1))
[ "$(wc -c <"$(dirname "$report")/graph.svg")" -lt 500000 ] || fail "graph.svg is 500 kB or more"
big=$scratch/big-graph
cp -R "$(dirname "$report")" "$big"
{ cat "$big/graph.svg"; head -c 600000 /dev/zero | tr '\0' x | sed 's/^/<!-- /; s/$/ -->/'; } >"$big/padded.svg"
mv "$big/padded.svg" "$big/graph.svg"
run "$TRAINRUN" report "$big"
expect_rc 0 "trainrun report on a run with a 600 kB graph.svg"
dom "$big/report.html"
expect_in "$out" '<a href="graph.svg">graph.svg</a>' "a big graph.svg linked"
expect_not_in "$out" '<div class="graph">' "a big graph.svg not inline"

# ---- how it looks: desktop and phone -----------------------------------------------------------
screenshot report-desktop "$report" 1280
screenshot report-phone "$report" 390

fits_phone report "$report"
expect_in "$out" "fits: 390 wide, scrolls 390" "report.html on a phone scrolls no wider than the screen"
# The measure itself, on a copy of the page with a line too long for a phone.
sed 's|<h2>Metrics</h2>|<div style="width:1000px">a block too wide for a phone</div>&|' "$report" >"$scratch/wide.html"
fits_phone wide "$scratch/wide.html"
expect_in "$out" "overflow: 390 wide" "the phone check sees a page that overflows"

# ---- the runs' index.html: a table of runs per recipe, a trend per recipe run twice or more ----
index=$scratch/runs/index.html
checks=$((checks + 1))
[ -s "$index" ] || fail "no runs/index.html after the runs"
rm -f "$index"
run "$TRAINRUN" report "$scratch/runs"
expect_rc 0 "trainrun report RUNS_DIR"
checks=$((checks + 1))
[ -s "$index" ] || fail "trainrun report RUNS_DIR wrote no index.html"
dom "$index"
expect_count "$out" '<table class="runs">' 2 "index.html: one table of runs per recipe"
expect_count "$out" '<svg class="trend"' 1 "index.html: a trend for mlp (3 runs), none for mlp-wide (1 run)"
expect_in "$out" "mlp-wide" "index.html names every recipe"
expect_not_in "$out" "<script" "index.html runs no script"
self_contained "$out" "$scratch/runs" "index.html"
screenshot index-desktop "$index" 1280
screenshot index-phone "$index" 390
fits_phone index "$index"
expect_in "$out" "fits: 390 wide, scrolls 390" "index.html on a phone scrolls no wider than the screen"

echo "screenshots: $shots"
finish
