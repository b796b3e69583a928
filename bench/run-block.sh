#!/bin/sh
# One transformer block, forward + backward: trainrun's engine vs PyTorch 1.13 on the same
# threads, interleaved in one run (machines are noisy: only the ratio means anything), at the
# BERT-small and BERT-base shapes; then the 16-bit GEMM path against plain sgemm, and a
# BERT-small layer's ops with bf16 activations against all-f32.
#   bench/run-block.sh [THREADS] [ROUNDS]   (from the build folder, after `make bench/block`)
set -eu
threads=${1:-$(nproc)}
rounds=${2:-3}
here=$(dirname "$0")
median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# The BLAS kernels trainrun picks for this CPU (src/backend/cpu/blas.c), for PyTorch's BLAS too.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$(./trainrun --version | sed -n 's/^CPU backend: OpenBLAS \(.*\) kernels.*/\1/p')}"
echo "threads=$threads blas=$OPENBLAS_CORETYPE rounds=$rounds $(date -u +%Y-%m-%dT%H:%MZ) $(lscpu | sed -n 's/^Model name: *//p')"
for shape in "256 4 1024 8 128 bert-small" "768 12 3072 8 128 bert-base/S128" "768 12 3072 2 512 bert-base/S512"; do
  set -- $shape
  iters=$(( $5 >= 512 ? 3 : 8 ))
  ours= theirs=
  for r in $(seq "$rounds"); do
    ours="$ours $(./bench/block "$1" "$2" "$3" "$4" "$5" $iters | sed 's/.*ms=\([0-9.]*\).*/\1/')"
    theirs="$theirs $(/usr/bin/python3 "$here/block.py" "$1" "$2" "$3" "$4" "$5" $iters "$threads" | sed 's/.*ms=//')"
  done
  echo "$6 D=$1 H=$2 F=$3 B=$4 S=$5: trainrun ms [$ours ] pytorch ms [$theirs ]"
  a=$(median $ours) b=$(median $theirs)
  echo "$6: trainrun $a ms, pytorch $b ms, ratio trainrun/pytorch $(echo "$a $b" | awk '{printf "%.2f", $1 / $2}')"
done
for shape in "1024 768 3072" "4096 768 768"; do
  ./bench/block gemm16 $shape 21
done
./bench/block ops16 256 4 1024 32 64 15
