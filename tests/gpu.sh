#!/bin/sh
# The CUDA build on a machine with a GPU: --version must name the GPU it sees. Skips (77)
# where trainrun was built without CUDA or no GPU is visible, as on the CPU-only CI machines.
. "$srcdir/tests/lib.sh"
out=$("$TRAINRUN" --version) || { echo "trainrun --version failed"; exit 1; }
echo "$out"
reason=$(gpu_skip_reason "$out") && { echo "SKIP: $reason"; exit 77; }
echo "$out" | grep -Eq 'GPUs seen: [1-9][0-9]* \(.+, [0-9.]+ GiB\)' || { echo "FAIL: no GPU name/memory"; exit 1; }
echo "$out" | grep -q 'driver present' || { echo "FAIL: GPUs seen without a driver"; exit 1; }
exit 0
