#!/bin/sh
# Inputs a hostile or careless user gives: a FIFO, a device or a folder where a file is read,
# YAML nested or aliased past any recipe's needs, control characters in what trainrun echoes.
# Each is refused within seconds (timeout 10: a hang fails as status 124), with its exit
# status and a message that names it.
. "$srcdir/tests/lib.sh"
recipes="$srcdir/recipes"
cd "$scratch"
mkfifo fifo fifo.csv
ln -s /dev/zero zero.csv
mkdir folder.yaml

# expect_refused STATUS KIND WHAT CMD...: CMD ends within 10 s with STATUS, naming KIND.
expect_refused() {
  want=$1 kind=$2 what=$3
  shift 3
  run timeout 10 "$@"
  expect_rc "$want" "$what"
  expect_in "$err" "not a regular file ($kind)" "$what: says what the file is"
}

# ---- files that are not regular files -------------------------------------------------------
expect_refused 2 "a FIFO" "a FIFO as the recipe" "$TRAINRUN" check "$scratch/fifo"
expect_in "$err" "$scratch/fifo" "a FIFO recipe is named"
expect_refused 2 "a character device" "/dev/zero as the recipe" "$TRAINRUN" check /dev/zero
expect_refused 2 "a directory" "a folder as the recipe" "$TRAINRUN" check "$scratch/folder.yaml"
printf 'extends: fifo\nmodel: {arch: mlp}\n' >extends.yaml
expect_refused 2 "a FIFO" "a FIFO as extends:" "$TRAINRUN" check extends.yaml
expect_in "$err" "extends.yaml:1:10:" "extends: FIFO placed at its value"
printf 'extends: /dev/zero\n' >zero.yaml
expect_refused 2 "a character device" "extends: /dev/zero" "$TRAINRUN" check zero.yaml
expect_refused 2 "a FIFO" "TRAINRUN_CONF a FIFO" \
  env TRAINRUN_CONF=$scratch/fifo "$TRAINRUN" check "$recipes/mlp.yaml"
expect_refused 2 "a FIFO" "TRAINRUN_SYSTEM_CONF a FIFO" \
  env TRAINRUN_SYSTEM_CONF=$scratch/fifo "$TRAINRUN" check "$recipes/mlp.yaml"
expect_refused 2 "a FIFO" "--plan a FIFO" "$TRAINRUN" plan "$recipes/mlp.yaml" --plan "$scratch/fifo"
expect_in "$err" "$scratch/fifo" "--plan FIFO named"
expect_refused 2 "a FIFO" "TRAINRUN_DEVICES a FIFO" \
  env TRAINRUN_DEVICES=$scratch/fifo "$TRAINRUN" plan "$recipes/mlp.yaml" --device-profile a100

# Data: exit 4, the file named, nothing read from /dev/zero (it would read to the 16 GiB cap).
expect_refused 4 "a FIFO" "a FIFO as data.train.source" \
  "$TRAINRUN" plan "$recipes/mlp.yaml" data.dataset=null data.train.source="$scratch/fifo.csv"
expect_in "$err" "$scratch/fifo.csv" "a FIFO data source is named"
expect_refused 4 "a character device" "/dev/zero as data.train.source" \
  "$TRAINRUN" plan "$recipes/mlp.yaml" data.dataset=null data.train.source="$scratch/zero.csv"
mkdir -p sets/piped
mkfifo sets/piped/dataset.yaml
expect_refused 4 "a FIFO" "a FIFO as dataset.yaml" \
  env TRAINRUN_DATASETS=$scratch/sets "$TRAINRUN" plan "$recipes/mlp.yaml" data.dataset=piped
expect_refused 4 "a FIFO" "a FIFO as gpt2-bpe's encoder.json" \
  "$TRAINRUN" plan "$recipes/gpt-small.yaml" data.tokenizer.vocab="$scratch/fifo"
expect_refused 4 "a FIFO" "a FIFO as a vocabulary file (chars, wordpiece)" \
  "$TRAINRUN" plan "$recipes/gpt-small.yaml" data.tokenizer.kind=chars data.tokenizer.vocab="$scratch/fifo" \
  data.tokenizer.merges=null
run timeout 30 "$TRAINRUN" "$recipes/mlp.yaml" model.init.path="$scratch/fifo" --quiet
expect_rc 4 "a FIFO as model.init.path"
expect_in "$err" "not a regular file" "a FIFO as model.init.path is refused"
checks=$((checks + 1))
[ ! -e runs ] || fail "a refused model.init.path left a run folder"

# ---- YAML past its limits: refused at the place, at once (1 MiB took over 900 s) ----------------
# nest N PREFIX: PREFIX, N '[' and N ']'.
nest() {
  awk -v n="$1" -v p="$2" 'BEGIN { printf "%s", p; for (i = 0; i < n; i++) printf "["
                                   for (i = 0; i < n; i++) printf "]"; print "" }'
}
nest 524280 'model: ' >deep.yaml
run timeout 10 "$TRAINRUN" check deep.yaml
expect_rc 2 "a 1 MiB nested recipe"
expect_in "$err" "deep.yaml:1:71: invalid YAML: collections nested more than 64 levels deep" \
  "the nesting is refused where it passes 64 levels"
printf 'extends: deep.yaml\n' >extends-deep.yaml
run timeout 10 "$TRAINRUN" check extends-deep.yaml
expect_rc 2 "extends: a 1 MiB nested recipe"
expect_in "$err" "deep.yaml:1:71: invalid YAML: collections nested" "a nested base is refused"
run timeout 10 "$TRAINRUN" check "$recipes/mlp.yaml" "$(nest 61440 model.layers=)"
expect_rc 2 "a 120 KB nested override"
expect_in "$err" "invalid YAML: collections nested more than 64 levels deep" "a nested override is refused"
nest 524280 'budget: ' >deep.conf
run timeout 10 env TRAINRUN_CONF="$scratch/deep.conf" "$TRAINRUN" check "$recipes/mlp.yaml"
expect_rc 2 "a 1 MiB nested TRAINRUN_CONF"
expect_in "$err" "deep.conf:1:72: invalid YAML: collections nested" "a nested conf is refused"
run timeout 10 env TRAINRUN_DEVICES="$scratch/deep.yaml" "$TRAINRUN" plan "$recipes/mlp.yaml" --device-profile a100
expect_rc 2 "a 1 MiB nested TRAINRUN_DEVICES"
expect_in "$err" "deep.yaml:1:71: collections nested more than 64 levels deep" "nested device profiles are refused"
mkdir -p sets/deep
nest 524280 'class_names: ' >sets/deep/dataset.yaml
run timeout 10 env TRAINRUN_DATASETS="$scratch/sets" "$TRAINRUN" plan "$recipes/mlp.yaml" data.dataset=deep
expect_rc 4 "a 1 MiB nested dataset.yaml"
expect_in "$err" "dataset.yaml:1:77: invalid YAML: collections nested" "a nested definition is refused"
# Billion laughs: ten aliases of ten aliases of … ; every value an alias repeats is counted.
{
  echo 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]'
  for i in 1 2 3 4 5 6 7 8 9; do
    p=$((i - 1))
    echo "a$i: &a$i [*a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p]"
  done
} >laughs.yaml
run timeout 10 "$TRAINRUN" check laughs.yaml
expect_rc 2 "billion laughs"
expect_in "$err" "laughs.yaml:5:45: invalid YAML: more than 100000 values, counting all that aliases repeat" \
  "aliases are counted as what they repeat"
awk 'BEGIN { printf "model: {hidden: ["; for (i = 0; i < 500000; i++) printf "1,"; print "1]}" }' >flow.yaml
run timeout 10 "$TRAINRUN" check flow.yaml
expect_rc 2 "a 1 MiB flow sequence"
expect_in "$err" "more than 100000 values" "a 1 MiB flow sequence is refused"

# ---- control characters from inputs are echoed as \xNN, never raw --------------------------------
esc=$(printf '\033')
printf '1,2,0\n1,\033]0;pwned\007,1\n' >escape.csv
run timeout 10 "$TRAINRUN" plan "$recipes/mlp.yaml" data.dataset=null data.train.source="$scratch/escape.csv"
expect_rc 4 "a CSV cell with a terminal escape"
expect_in "$err" "escape.csv:2:3: '\\x1b]0;pwned\\x07' is not a number" "a CSV cell's escape is shown as \\xNN"
expect_not_in "$err" "$esc" "a CSV cell's escape is not echoed raw"
printf 'model:\n  "ar\\x1b]0;pwned\\x07ch": mlp\n' >escape.yaml
run timeout 10 "$TRAINRUN" check escape.yaml
expect_rc 2 "a recipe key with a terminal escape"
expect_in "$err" "unknown key 'model.ar\\x1b]0;pwned\\x07ch'" "a recipe key's escape is shown as \\xNN"
expect_not_in "$err" "$esc" "a recipe key's escape is not echoed raw"
run timeout 10 "$TRAINRUN" check "$recipes/mlp.yaml" "$(printf 'seed=\033[2J')"
expect_rc 2 "an override with a terminal escape"
expect_not_in "$err" "$esc" "an override's escape is not echoed raw"

finish
