#!/bin/sh
# Replays the fuzz corpora and the inputs that once crashed the recipe parser or the csv reader,
# under ASan+UBSan.
set -u
replay="$top_builddir/tests/fuzz_replay_san"
[ -x "$replay" ] || { echo "SKIP: $replay not built"; exit 77; }
"$replay" "$srcdir"/tests/fuzz/corpus/* "$srcdir"/tests/fuzz/regressions/* || exit 1
replay_csv="$top_builddir/tests/fuzz_replay_csv_san"
[ -x "$replay_csv" ] || { echo "SKIP: $replay_csv not built"; exit 77; }
"$replay_csv" "$srcdir"/tests/fuzz/corpus-csv/* "$srcdir"/tests/fuzz/regressions-csv/*
