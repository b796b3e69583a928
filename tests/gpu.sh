#!/bin/sh
# The CUDA build on a machine with a GPU: --version must name the GPU it sees. Skips (77)
# where trainrun was built without CUDA or no GPU is visible, as on the CPU-only CI machines.
set -u
out=$("$TRAINRUN" --version) || { echo "trainrun --version failed"; exit 1; }
echo "$out"
case "$out" in
  *"CUDA backend: not built"*) echo "SKIP: built without CUDA"; exit 77 ;;
  *"GPUs seen: 0"*) echo "SKIP: no GPU visible"; exit 77 ;;
esac
echo "$out" | grep -Eq 'GPUs seen: [1-9][0-9]* \(.+, [0-9.]+ GiB\)' || { echo "FAIL: no GPU name/memory"; exit 1; }
echo "$out" | grep -q 'driver present' || { echo "FAIL: GPUs seen without a driver"; exit 1; }
exit 0
