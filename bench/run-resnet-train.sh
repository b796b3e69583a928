#!/bin/sh
# recipes/resnet.yaml (Fashion-MNIST, 4 epochs) in trainrun, then the same job in PyTorch 1.13
# (bench/resnet_train.py), on the same threads: seconds per epoch of training (trainrun's from
# its log: training steps only, like PyTorch's) and test accuracy.
#   bench/run-resnet-train.sh [THREADS] [EPOCHS]   (from the checkout, after building)
set -eu
threads=${1:-$(nproc)}
epochs=${2:-4}
here=$(dirname "$0")
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# The BLAS kernels trainrun picks for this CPU (src/backend/cpu/blas.c), for PyTorch's BLAS too.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$(./trainrun --version | sed -n 's/^CPU backend: OpenBLAS \(.*\) kernels.*/\1/p')}"
echo "threads=$threads blas=$OPENBLAS_CORETYPE epochs=$epochs $(date -u +%Y-%m-%dT%H:%MZ) $(lscpu | sed -n 's/^Model name: *//p')"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
./trainrun recipes/resnet.yaml train.epochs="$epochs" report.dir="$out" --quiet >/dev/null
wall=$(( $(date +%s) - start ))
line=$(grep '^done:' "$out"/resnet/latest/log.txt)
seconds=$(echo "$line" | sed 's/.* steps in \([0-9.]*\) s.*/\1/')
acc=$(echo "$line" | sed 's/.*test accuracy \([0-9.]*\).*/\1/')
echo "trainrun resnet seconds_per_epoch=$(echo "$seconds $epochs" | awk '{printf "%.1f", $1 / $2}') test_accuracy=$acc wall_s=$wall"
/usr/bin/python3 "$here/resnet_train.py" "$threads" "$epochs"
