#!/bin/sh
# Replays, under ASan+UBSan, every fuzz harness's seeds and the inputs that once crashed or
# hung a reader (tests/fuzz/regressions-<reader>/), each within FUZZ_REPLAY_SECONDS (replay.c):
# the repository's own recipes, definitions, fixtures and tokenizer files, as tests/fuzz/run.sh
# seeds the fuzzers with them.
set -u
status=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for reader in recipe dataset csv tsv jsonl text idx wordpiece bpe safetensors plan; do
    replay="$top_builddir/tests/fuzz_replay_${reader}_san"
    [ -x "$replay" ] || { echo "SKIP: $replay not built"; exit 77; }
    case $reader in
    recipe) own="$srcdir/recipes/"*.yaml ;;
    dataset) own="$srcdir/datasets/*/dataset.yaml $srcdir/tests/fixtures/*/dataset.yaml" ;;
    wordpiece) own="$srcdir/datasets/vocab/bert-base-uncased/vocab.txt" ;;
    bpe) own="$srcdir/datasets/vocab/gpt2/encoder.json" ;;
    safetensors) own="$srcdir/tests/fixtures/*.safetensors $srcdir/tests/fixtures/hf/*/model.safetensors" ;;
    plan) own="$srcdir/tests/fixtures/run-mlp/plan.json" ;;
    *) own= ;;
    esac
    inputs=
    for f in $own "$srcdir/tests/fuzz/seeds/$reader"/* "$srcdir/tests/fuzz/regressions-$reader"/*; do
        [ -f "$f" ] && inputs="$inputs $f"
    done
    echo "== $reader: $(echo $inputs | wc -w) inputs"
    # shellcheck disable=SC2086  # the inputs are paths without blanks (the tree's own files)
    # A hang kept as a regression must not hold make check for long: each harness gets 300 s.
    if ! timeout "${FUZZ_REPLAY_HARNESS_SECONDS:-300}" "$replay" $inputs >"$out" 2>&1; then
        tail -30 "$out"
        echo "FAIL: $reader (a timeout stops at the input after the last one listed)"
        status=1
    fi
    grep '^SLOW' "$out"
done
exit $status
