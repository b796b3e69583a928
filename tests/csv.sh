#!/bin/sh
# Tables and inline data as a user meets them: trainrun-recipe(5)'s own tiny-gpt example, cut
# from the man page, passes check and plan; inline csv, tsv, jsonl and text plan; what the data
# stage would refuse before reading a file, check refuses too (exit 2), and plan (exit 4); a csv
# with a header, quoted names, CRLF and species by name trains, and its classes are in the run's
# labels.txt and report; a missing cell is refused at file:line:column, or dropped on request.
. "$srcdir/tests/lib.sh"
cd "$scratch" || exit 1
export TRAINRUN_CONF="" TRAINRUN_SYSTEM_CONF="" TRAINRUN_DATASETS="$srcdir/datasets"   # no local conf files; the shipped data sets

# 1. The man page's example, as printed, with a corpus under corpus/.
awk '/^name: tiny-gpt$/ {p = 1} p && /^\.Ed$/ {exit} p' "$srcdir/man/trainrun-recipe.5" >tiny-gpt.yaml
checks=$((checks + 1))
grep -q 'source: corpus/train.txt, format: text' tiny-gpt.yaml ||
  fail "the tiny-gpt example is no longer in trainrun-recipe(5): $(cat tiny-gpt.yaml)"
mkdir corpus
i=0
while [ $i -lt 400 ]; do
  echo "It is a truth universally acknowledged, that a single man in possession of a good fortune $i."
  i=$((i + 1))
done >corpus/train.txt
head -n 40 corpus/train.txt >corpus/valid.txt
run "$TRAINRUN" check tiny-gpt.yaml
expect_rc 0 "check on trainrun-recipe(5)'s tiny-gpt example"
run "$TRAINRUN" plan tiny-gpt.yaml
expect_rc 0 "plan on trainrun-recipe(5)'s tiny-gpt example"
expect_in "$out" "decision:" "the tiny-gpt plan"

# 2. Every format inline: the format from the name or the key, the classes from the labels.
printf 'text\tlabel\nthe rain in spain\tweather\nfalls mainly\tweather\non the plain\tplace\n' >t.tsv
printf '{"text": "a fine day", "label": "good"}\n{"text": "a dull day", "label": "bad"}\n' >t.jsonl
printf '{"text": "more days", "label": "good"}\n{"text": "fewer days", "label": "bad"}\n' >>t.jsonl
printf 'x,y,kind\n1,2,cat\n3,4,dog\n5,6,cat\n7,8,dog\n9,10,cat\n11,12,dog\n13,14,cat\n15,16,dog\n' >t.csv
bert='model.arch=bert model.layers=1 model.hidden=16 model.heads=2 model.ffn=32 model.max_len=16 data.tokenizer=bytes'
for source in "t.tsv text=text label=label" "t.jsonl text=text label=label" "t.csv label=kind"; do
  set -- $source
  file=$1
  shift
  args=
  for kv in "$@"; do args="$args data.train.$kv"; done
  # shellcheck disable=SC2086
  case $file in
    *.csv) run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" '~data.dataset' data.train.source=$file $args ;;
    *) run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" '~data.dataset' data.train.source=$file $args $bert ;;
  esac
  expect_rc 0 "plan on inline $file"
done
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" '~data.dataset' data.train.source=t.csv data.train.format=csv \
  data.train.label=-1 data.train.header=true
expect_rc 0 "plan on inline csv with label -1 and header true"

# 3. What plan refuses before reading, check refuses: exit 2 there, 4 at plan, the key named.
printf 'model: {arch: mlp}\ndata:\n  train: {source: images.gz, format: idx}\n' >idx.yaml
run "$TRAINRUN" check idx.yaml
expect_rc 2 "check on an inline idx source"
expect_in "$err" "idx.yaml:3:38: data.train.format: idx data is not read inline" "check's idx refusal"
run "$TRAINRUN" plan idx.yaml
expect_rc 4 "plan on an inline idx source"
expect_in "$err" "data.train.format: idx data is not read inline" "plan's idx refusal"
printf 'model: {arch: mlp}\ndata:\n  train: t.csv\n  valid: v.tsv\n' >mixed.yaml
run "$TRAINRUN" check mixed.yaml
expect_rc 2 "check on splits in two formats"
expect_in "$err" "data.valid.source: tsv data, but data.train is csv" "check's format mismatch"
printf 'model: {arch: mlp}\ndata:\n  train: {source: t.csv, text: x}\n' >text.yaml
run "$TRAINRUN" check text.yaml
expect_rc 2 "check on a csv with a text field"
expect_in "$err" "data.train.text: a csv table's features are every column" "check's csv text refusal"
printf 'model: {arch: mlp}\ndata:\n  train: notes.dat\n' >ext.yaml
run "$TRAINRUN" check ext.yaml
expect_rc 2 "check on a file whose name says no format"
expect_in "$err" "data.train.source: 'notes.dat' does not say its format" "check's unknown extension"
printf 'model: {arch: bert}\ndata:\n  train: {source: t.tsv, text: text}\n  tokenizer: bytes\n' >nolabel.yaml
run "$TRAINRUN" check nolabel.yaml
expect_rc 2 "check on an inline tsv without its label field"
expect_in "$err" "data.train.label: null; a tsv file's samples need the field holding their class" "tsv label"

# 4. The iris table with species names: trains, and the run names its classes.
run "$TRAINRUN" "$srcdir/recipes/iris.yaml" report.dir="$scratch/runs" --quiet
expect_rc 0 "training recipes/iris.yaml"
dir=$(ls -d "$scratch"/runs/iris/2* 2>/dev/null | head -n 1)
checks=$((checks + 1))
[ -n "$dir" ] && [ "$(cat "$dir/labels.txt")" = "$(printf 'setosa\nversicolor\nvirginica')" ] ||
  fail "labels.txt does not list setosa, versicolor, virginica: $(cat "$dir/labels.txt" 2>&1)"
expect_in "$(cat "$dir/report.md" 2>&1)" "3 classes: setosa, versicolor, virginica" "report.md's classes"
expect_in "$(cat "$dir/report.html" 2>&1)" "3 classes: setosa, versicolor, virginica" "report.html's classes"

# 5. Missing cells: refused at their place by default (exit 4), dropped when asked.
printf 'a,b,kind\n1,2,x\n3,NA,y\n5,6,x\n7,8,y\n9,10,x\n11,12,y\n13,14,x\n15,16,y\n17,18,x\n19,20,y\n' >m.csv
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" '~data.dataset' data.train.source=m.csv
expect_rc 4 "plan on a csv with an NA cell"
expect_in "$err" "m.csv:3:3: missing value ('NA'); set missing: drop, zero or mean" "the NA cell's place"
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" '~data.dataset' data.train.source=m.csv data.train.missing=drop
expect_rc 0 "plan on the same csv with missing: drop"
printf '1,2,0\n3,"4,1\n' >q.csv
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" '~data.dataset' data.train.source=q.csv
expect_rc 4 "plan on a csv with a quote never closed"
expect_in "$err" "q.csv:2:3: this quoted cell is never closed" "the open quote's place"
finish
