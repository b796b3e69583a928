#!/bin/sh
# The recipes' small ResNet (widths 16/32/64, 2 basic blocks per stage, 28×28 grey images), one
# training step's forward + backward: trainrun's engine vs PyTorch 1.13 on the same threads,
# interleaved round by round (machines are noisy: only the ratio of medians means anything).
#   bench/run-resnet.sh [THREADS] [ROUNDS] [B]   (from the build folder, after `make bench/resnet`)
# TR_PROFILE=1 in the environment adds trainrun's time per op (stderr) to each round.
set -eu
threads=${1:-$(nproc)}
rounds=${2:-5}
batch=${3:-128}
iters=5
here=$(dirname "$0")
median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# The BLAS kernels trainrun picks for this CPU (src/backend/cpu/blas.c), for PyTorch's BLAS too.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$(./trainrun --version | sed -n 's/^CPU backend: OpenBLAS \(.*\) kernels.*/\1/p')}"
echo "threads=$threads blas=$OPENBLAS_CORETYPE rounds=$rounds B=$batch $(date -u +%Y-%m-%dT%H:%MZ) $(lscpu | sed -n 's/^Model name: *//p')"
ours= theirs=
for r in $(seq "$rounds"); do
  ours="$ours $(./bench/resnet "$batch" $iters | sed 's/.*ms=\([0-9.]*\).*/\1/')"
  theirs="$theirs $(/usr/bin/python3 "$here/resnet.py" "$batch" $iters "$threads" | sed 's/.*ms=//')"
done
echo "resnet B=$batch: trainrun ms [$ours ] pytorch ms [$theirs ]"
a=$(median $ours) b=$(median $theirs)
echo "resnet: trainrun $a ms, pytorch $b ms, ratio trainrun/pytorch $(echo "$a $b" | awk '{printf "%.2f", $1 / $2}')"
