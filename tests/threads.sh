#!/bin/sh
# The same recipe and seed give bitwise the same weights on 1 and on 3 threads: the MLP with
# dropout, shuffling and two loader threads, a small ResNet (convolutions, batch norm,
# strided and 1×1 shortcuts), and a tiny BERT in bf16 with dynamic batching (on a CPU that
# computes bf16: oneDNN's bf16 GEMMs, attention's tiles and the bf16 bodies; elsewhere widened).
# Every kernel splits its work by the shape, never by the thread count (src/backend/cpu/conv.c,
# matmul.c, attention.c), and every sum runs in one fixed order.
. "$srcdir/tests/lib.sh"
train() {   # train THREADS NAME RECIPE OVERRIDES...
  threads=$1 name=$2
  shift 2
  OMP_NUM_THREADS=$threads run "$TRAINRUN" "$@" name="$name" report.dir="$scratch/$threads" \
    train.checkpoint_every=0 train.eval_every=0 --quiet
  expect_rc 0 "$name"
}
for threads in 1 3; do
  train $threads mlp "$srcdir/recipes/mlp.yaml" train.steps=120 data.num_workers=2
  TRAINRUN_DATASETS="$srcdir/tests/fixtures" train $threads resnet "$srcdir/recipes/resnet.yaml" \
    data.dataset=parity-image model.layers=1 model.hidden=4 train.batch_size=32 train.steps=30 \
    train.epochs=null
  train $threads bert-small "$srcdir/recipes/bert-small.yaml" model.layers=1 model.hidden=64 model.heads=2 \
    model.ffn=128 train.batch_size=16 train.steps=6 optimize.amp=bf16 optimize.dynamic_batching=on
done
for model in mlp resnet bert-small; do
  checks=$((checks + 1))
  one=$(ls "$scratch"/1/$model/latest/checkpoints/*.safetensors)
  three=$(ls "$scratch"/3/$model/latest/checkpoints/*.safetensors)
  cmp -s "$one" "$three" || fail "$model: the weights after 1 and 3 threads differ"
done
finish
