#!/bin/sh
# Replays the fuzz corpus and the inputs that once crashed the recipe parser, under ASan+UBSan.
set -u
replay="$top_builddir/tests/fuzz_replay_san"
[ -x "$replay" ] || { echo "SKIP: $replay not built"; exit 77; }
"$replay" "$srcdir"/tests/fuzz/corpus/* "$srcdir"/tests/fuzz/regressions/*
