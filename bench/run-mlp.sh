#!/bin/sh
# recipes/mlp.yaml in trainrun against the same job in PyTorch 1.13 (bench/mlp.py), same
# threads, interleaved: seconds per epoch (trainrun's from its own log: training time only,
# like PyTorch's) and test accuracy.   bench/run-mlp.sh [THREADS] [ROUNDS]   (from the checkout)
set -eu
threads=${1:-$(nproc)}
rounds=${2:-3}
here=$(dirname "$0")
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# The BLAS kernels trainrun picks for this CPU (src/backend/cpu/blas.c), for PyTorch's BLAS too.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$(./trainrun --version | sed -n 's/^CPU backend: OpenBLAS \(.*\) kernels.*/\1/p')}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  ./trainrun recipes/mlp.yaml report.dir="$out" >/dev/null
  line=$(grep '^done:' "$out"/mlp/latest/log.txt)
  seconds=$(echo "$line" | sed 's/.* steps in \([0-9.]*\) s.*/\1/')
  acc=$(echo "$line" | sed 's/.*test accuracy \([0-9.]*\).*/\1/')
  echo "trainrun mlp seconds_per_epoch=$(echo "$seconds" | awk '{printf "%.4f", $1 / 30}') test_accuracy=$acc"
  /usr/bin/python3 "$here/mlp.py" "$threads" datasets/digits/digits.csv.gz
done
