#!/bin/sh
# The runs index and the comparison of two runs as a user meets them: a runs folder built by
# hand from report.json fixtures (two recipes, a failed run, a run killed before its report,
# a schema_version 1 report, a `latest` link) and one real mlp run; `trainrun report RUNS_DIR`
# writes index.md and index.html with the right rows, links, statuses, regressions and trend,
# the same bytes twice; `trainrun report --compare A B` shows them side by side; folders that
# are neither a run nor a runs folder are refused with status 2.
. "$srcdir/tests/lib.sh"

fixtures=$srcdir/tests/fixtures/compare
runs=$scratch/runs
bert=$runs/bert-small
gpt=$runs/gpt
mkdir -p "$bert" "$gpt"
for i in 1 2 3; do
  mkdir "$bert/2026110$i-100000" "$gpt/2026110$i-120000"
  cp "$fixtures/bert-small-$i.json" "$bert/2026110$i-100000/report.json"
  cp "$fixtures/gpt-$i.json" "$gpt/2026110$i-120000/report.json"
done
mkdir "$bert/20261104-100000"                     # killed before it wrote a report
mkdir -p "$runs/notes/drafts"                      # not a recipe: no run folder in it
ln -s 20261104-100000 "$bert/latest"
echo '# bert-small 1' >"$bert/20261101-100000/report.md"
echo '<p>bert-small 1</p>' >"$bert/20261101-100000/report.html"
echo '# bert-small 2' >"$bert/20261102-100000/report.md"
# The second bert run was made with a tighter metric limit: 1 %, not 2 %.
cat >"$bert/20261102-100000/recipe.yaml" <<'YAML'
name: bert-small                              # recipe
report:
  dir: runs                                   # default
  regression:
    metric: 0.01                              # override
    time: 0.1                                 # default
    memory: 0.05                              # default
YAML

# One real run beside them.
run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=20 report.dir="$runs" report.regression.time=0.5 --quiet
expect_rc 0 "a short mlp run"
mlp=$(ls -d "$runs"/mlp/2* | head -n 1)

run "$TRAINRUN" report "$runs"
expect_rc 0 "trainrun report RUNS_DIR"
expect_in "$out" "$runs/index.md" "report names the index it wrote"
expect_in "$out" "$runs/index.html" "report names the HTML index"
md=$(cat "$runs/index.md" 2>/dev/null)
html=$(cat "$runs/index.html" 2>/dev/null)

# The summary: three recipes, eight runs; bert-small's newest run has no report.
expect_in "$md" "3 recipes, 8 runs. The newest run of 1 recipe did not finish or regressed." "index.md: the summary"
first=$(echo "$md" | grep -m 1 '^| bert-small \|^| gpt \|^| mlp ')
expect_in "$first" "| bert-small | 20261104-100000 | unknown (no report) |" "index.md: what broke comes first"
# The rows, newest first, with links to the reports that are there.
expect_in "$md" "| 20261104-100000 |  | unknown (no report) |" "index.md: a run without report.json"
expect_in "$md" "| 20261103-100000 | 2026-11-03 10:00 | failed | 5 | 40.5 s |" "index.md: the failed run"
expect_in "$md" "| [20261102-100000](bert-small/20261102-100000/report.md) | 2026-11-02 10:00 | finished | 0 | 27.3 min | 70.1 % |" \
  "index.md: a finished run, linked"
expect_in "$md" "| bf16, checkpointing selective 4 of 4, 16 × 2 | 1.40 GiB |" "index.md: the plan in short, footprint"
expect_in "$md" "test/accuracy 0.7247 → 0.701 (−3.3 %), past the 1 % limit" \
  "index.md: a regression judged with the run's own limit"
expect_in "$md" "| 20261101-120000 |  | finished | 0 | 5.0 min |" "index.md: a schema_version 1 report"
expect_in "$md" "| 3.1 | −0.1 (−3.1 %) |" "index.md: the key metric's change"
awk '/^## /{b = $2 == "bert-small"} b && /^\| \[?2026/{print substr($2, 1, 16)}' "$runs/index.md" | tr -d '[' |
  tr '\n' ' ' >"$scratch/order"
checks=$((checks + 1))
[ "$(cat "$scratch/order")" = "20261104-100000 20261103-100000 20261102-100000 20261101-100000 " ] ||
  fail "index.md: bert-small's runs newest first: $(cat "$scratch/order")"
expect_not_in "$md" "latest" "index.md: the latest link is not a run"
expect_not_in "$md" "notes" "index.md: a folder without runs is not a recipe"
# The trends.
expect_in "$md" "Trend: █▁ test/accuracy (higher is better) over 2 runs: 72.47 % → 70.1 %" "index.md: bert's trend"
expect_in "$md" "Trend: █▁ eval/loss (lower is better) over 2 runs: 3.2 → 3.1" "index.md: gpt's trend"
# The real run is listed, finished, with a link to its report.
expect_in "$md" "](mlp/$(basename "$mlp")/report.md) |" "index.md: the real run, linked"
expect_in "$(echo "$md" | grep "^| mlp ")" "| finished |" "index.md: the real run finished"

expect_in "$html" '<meta name="viewport"' "index.html: readable on a phone"
expect_in "$html" '<table class="runs">' "index.html: a table per recipe"
expect_in "$html" '<svg class="trend"' "index.html: the trend sparkline"
expect_in "$html" '<a href="bert-small/20261101-100000/report.html">20261101-100000</a>' "index.html: links to report.html"
expect_in "$html" '<a href="bert-small/20261102-100000/report.md">20261102-100000</a>' "index.html: else report.md"
expect_in "$html" '<td>20261104-100000</td><td></td><td class="no-report">unknown (no report)</td>' \
  "index.html: a run without report.json"
expect_in "$html" '<td class="failed">failed</td>' "index.html: the failed run"
expect_not_in "$html" "<script" "index.html runs no script"
expect_not_in "$html" "http" "index.html loads nothing"
checks=$((checks + 1))
[ "$(grep -c '<table class="runs">' "$runs/index.html")" = 3 ] || fail "index.html: one runs table per recipe"
checks=$((checks + 1))
ls -a "$runs" | grep -q '\.tmp$' && fail "a temporary index file was left behind"

# Rendering again gives the same bytes.
cp "$runs/index.md" "$scratch/index.md.1"
cp "$runs/index.html" "$scratch/index.html.1"
run "$TRAINRUN" report "$runs"
expect_rc 0 "trainrun report RUNS_DIR, again"
for f in index.md index.html; do
  checks=$((checks + 1))
  cmp -s "$runs/$f" "$scratch/$f.1" || fail "$f re-rendered differently"
done

# Two runs side by side, B judged against A with B's limits.
run "$TRAINRUN" report --compare "$bert/20261101-100000" "$bert/20261102-100000" --html "$scratch/compare.html"
expect_rc 0 "report --compare"
expect_in "$out" "# 20261101-100000 vs 20261102-100000" "--compare: the title"
expect_in "$out" "| duration | 22.8 min | 27.3 min | +4.5 min (+20.0 %) |" "--compare: the duration"
expect_in "$out" "| key metric test/accuracy | 0.7247 | 0.701 | −0.0237 (−3.3 %) |" "--compare: the key metric"
expect_in "$out" "| eval/accuracy | 0.72 | 0.7 |" "--compare: a final metric both have"
expect_in "$out" "| precision | fp32 | bf16 | changed |" "--compare: a plan knob"
expect_in "$out" "| memory footprint (measured) | 1.20 GiB | 1.40 GiB |" "--compare: the footprint"
expect_in "$out" "**4 regressions** past the limits (metric 1 %, time 10 %, memory 5 %)" "--compare: B's limits"
expect_in "$out" "- budget 4.00 GiB → 2.00 GiB" "--compare: why the plan changed"
expect_in "$out" "- data: the longest sequence 128 → 512 tokens" "--compare: the data's reason"
page=$(cat "$scratch/compare.html" 2>/dev/null)
expect_in "$page" "<title>20261101-100000 vs 20261102-100000</title>" "--compare --html: the page"
expect_in "$page" '<svg class="plot"' "--compare --html: the loss curves"
expect_in "$page" "A 20261101-100000" "--compare --html: a line per run"
expect_not_in "$page" "http" "--compare --html loads nothing"
# A run without report.json, a schema_version 1 one, the real one.
run "$TRAINRUN" report --compare "$gpt/20261101-120000" "$mlp"
expect_rc 0 "report --compare with a schema_version 1 report"
expect_in "$out" "| recipe | gpt | mlp | changed |" "--compare: two recipes"
expect_in "$out" "past the limits (metric 2 %, time 50 %, memory 5 %)" "--compare: the limits the real run recorded"
run "$TRAINRUN" report --compare "$bert/20261103-100000" "$bert/20261104-100000"
expect_rc 2 "report --compare with a run that has no report"
expect_in "$err" "20261104-100000 has no report.json" "the refusal says why"

run "$TRAINRUN" report --compare "$bert/20261101-100000" "$bert/20261102-100000" --html "$scratch/no/such/page.html"
expect_rc 1 "report --compare --html into a folder that does not exist"
expect_in "$err" "cannot write $scratch/no/such/page.html: No such file or directory" "the failure says why"

# Bad inputs.
mkdir "$scratch/empty"
run "$TRAINRUN" report "$scratch/empty"
expect_rc 2 "an empty folder"
expect_in "$err" "is not a run folder" "the refusal says why"
run "$TRAINRUN" report "$bert"
expect_rc 2 "one recipe's folder"
expect_in "$err" "holds the runs of one recipe" "the refusal names the right folder"
run "$TRAINRUN" report "$scratch/nowhere"
expect_rc 2 "a folder that does not exist"
run "$TRAINRUN" report "$runs" --html "$scratch/x.html"
expect_rc 2 "--html without --compare"
run "$TRAINRUN" report --compare "$bert/20261101-100000"
expect_rc 2 "--compare with one run"
finish
