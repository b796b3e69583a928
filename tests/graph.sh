#!/bin/sh
# trainrun graph: the chosen program as DOT that Graphviz renders to SVG; a collapsed picture of a
# model with blocks holds a box per block and phase and the arena's peak; a bad --format is 2.
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
run "$TRAINRUN" graph "$recipe" --format png
expect_rc 2 "a bad --format"
expect_in "$err" "--format: dot or svg, not 'png'" "its sentence"
finish
