#!/bin/sh
# The hostile-input suite's quick cases (tests/hostile/hostile.py): bad recipes, data,
# downloads, checkpoints, faults, signals, limits, links and security, each asserting its exit
# status, that its message names the input, and what is left on disk. bench/hostile/run-all
# runs every case, the slow ones too.
set -u
: "${TRAINRUN:?set TRAINRUN to the trainrun binary}" "${srcdir:?set srcdir}"
export TRAINRUN srcdir
exec python3 "$srcdir/tests/hostile/hostile.py" --jobs "${HOSTILE_JOBS:-8}" "$@"
