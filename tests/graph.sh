#!/bin/sh
# trainrun graph: the chosen program as DOT that Graphviz renders to SVG; a collapsed picture of a
# model with blocks holds a box per block and phase and the arena's peak; --full on a big model
# warns; a run draws graph.dot and graph.svg into its folder (a failing dot: a warning, no SVG);
# a bad --format is 2.
. "$srcdir/tests/lib.sh"
recipe="$srcdir/recipes/mlp.yaml"
run "$TRAINRUN" graph "$recipe"
expect_rc 0 "graph as DOT"
expect_in "$out" "digraph program {" "DOT"
expect_in "$out" "peak of the arena" "the arena's peak marked"
expect_in "$out" 'block 1, backward' "a collapsed block"
run "$TRAINRUN" graph "$recipe" --full
expect_not_in "$out" 'block 1, backward' "--full collapses nothing"
if command -v dot >/dev/null; then
  run "$TRAINRUN" graph "$recipe" --format svg --output "$scratch/g.svg"
  expect_rc 0 "graph as SVG"
  expect_in "$(cat "$scratch/g.svg")" "<svg" "an SVG"
  expect_in "$(cat "$scratch/g.svg")" "cross_entropy" "the ops in it"
else
  echo "note: no Graphviz dot: the SVG path not checked"
fi
# BERT-base --full: over 1,000 nodes (1,157 without checkpointing; the plan this host picks
# decides how many recompute), more than dot draws in a minute: said.
if [ -s "$srcdir/datasets/wordnet-senses/train.tsv" ] || [ -d "$XDG_CACHE_HOME" ]; then
  run "$TRAINRUN" graph "$srcdir/recipes/bert.yaml" --full --output "$scratch/bert.dot"
  if [ "$rc" = 0 ]; then
    expect_in "$err" "nodes: Graphviz's dot can take minutes" "--full on BERT-base warns"
    nodes=$(printf '%s\n' "$err" | sed -n 's/.*--full draws all \([0-9]*\) nodes.*/\1/p')
    checks=$((checks + 1))
    [ "${nodes:-0}" -gt 1000 ] || fail "--full on BERT-base: ${nodes:-no} nodes said, more than 1000 expected"
  else
    echo "skip: wordnet-senses is not prepared here ($err)"
  fi
fi

# A run draws its program into its folder for report.html; without a working dot, a warning,
# graph.dot alone and nothing half-written.
run "$TRAINRUN" "$recipe" train.steps=5 report.dir="$scratch/runs" --quiet
expect_rc 0 "a short run"
dir=$scratch/runs/mlp/latest
checks=$((checks + 1))
[ -s "$dir/graph.dot" ] || fail "the run wrote no graph.dot"
if command -v dot >/dev/null; then
  expect_in "$(cat "$dir/graph.svg")" "cross_entropy" "the run's graph.svg"
  expect_in "$(cat "$dir/report.md")" "[graph.svg](graph.svg)" "report.md links it"
fi
mkdir -p "$scratch/bin"
printf '#!/bin/sh\necho "dot: broken" >&2\nexit 3\n' >"$scratch/bin/dot"
chmod +x "$scratch/bin/dot"
path=$PATH
PATH="$scratch/bin:$PATH"
run "$TRAINRUN" "$recipe" train.steps=5 report.dir="$scratch/broken" --quiet
PATH=$path
expect_rc 0 "a run whose dot fails"
dir=$scratch/broken/mlp/latest
expect_in "$(cat "$dir/log.txt")" "warning: the graph is not drawn: dot -Tsvg" "the warning in the log"
checks=$((checks + 1))
[ -s "$dir/graph.dot" ] && [ ! -e "$dir/graph.svg" ] && [ ! -e "$dir/graph.svg.partial" ] ||
  fail "graph.dot alone expected: $(ls "$dir" | tr '\n' ' ')"
expect_not_in "$(cat "$dir/report.md")" "## Program" "no Program section without graph.svg"

run "$TRAINRUN" graph "$recipe" --format png
expect_rc 2 "a bad --format"
expect_in "$err" "--format: dot or svg, not 'png'" "its sentence"
finish
