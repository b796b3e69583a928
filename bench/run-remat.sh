#!/bin/sh
# Gradient checkpointing on a BERT-base-shaped classifier (12 layers, hidden 768, seq 512,
# micro-batch 4, dropout 0.1): trainrun's remat pass (bench/remat) against PyTorch 1.13 with
# torch.utils.checkpoint around each layer (bench/remat.py), none vs full, same threads. Prints
# trainrun's activation arena under every setting (exact, from the plan), then per setting and
# side the median step time (forward + backward) and the process's peak resident memory.
#   bench/run-remat.sh [THREADS] [ITERS] [B] [S]   (from the build folder, after `make bench/remat`;
#   a step takes 10–20 s on two cores: ITERS=3 is a few minutes in all)
set -eu
threads=${1:-$(nproc)}
iters=${2:-3}
batch=${3:-4}
seq=${4:-512}
here=$(dirname "$0")
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# The BLAS kernels trainrun picks for this CPU (src/backend/cpu/blas.c), for PyTorch's BLAS too.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$(./trainrun --version | sed -n 's/^CPU backend: OpenBLAS \(.*\) kernels.*/\1/p')}"
echo "threads=$threads blas=$OPENBLAS_CORETYPE iters=$iters B=$batch S=$seq $(date -u +%Y-%m-%dT%H:%MZ)"
./bench/remat plan "$batch" "$seq"
field() { echo "$1" | sed "s/.* $2=\([0-9.]*\).*/\1/"; }
echo
echo "| checkpointing | trainrun ms | PyTorch ms | trainrun peak RSS MiB | PyTorch peak RSS MiB |"
echo "| --- | ---: | ---: | ---: | ---: |"
for mode in none full; do
  ours=$(./bench/remat $mode "$batch" "$seq" "$iters")
  theirs=$(/usr/bin/python3 "$here/remat.py" $mode "$batch" "$seq" "$iters" "$threads")
  echo "# $ours" >&2
  echo "# $theirs" >&2
  echo "| $mode | $(field "$ours" ms) | $(field "$theirs" ms) | $(field "$ours" peak_rss_mib) |" \
    "$(field "$theirs" peak_rss_mib) |"
done
