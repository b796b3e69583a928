#!/bin/sh
# Checkpoints are safetensors files that Hugging Face's reader (the parser behind PyTorch's
# safetensors.torch.load_file) loads: every tensor, its shape and bytes, and the metadata, for
# the MLP (AdamW moments) and a small ResNet (SGD momentum, batch-norm statistics).
. "$srcdir/tests/lib.sh"
python=${TRAINRUN_TEST_PYTHON:-$srcdir/.venv/bin/python}
"$python" -c 'import safetensors, numpy' 2>/dev/null ||
  { echo "SKIP: no Python with safetensors at $python (scripts/setup makes .venv)"; exit 77; }
run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=50 report.dir="$scratch" --quiet
expect_rc 0 "mlp"
TRAINRUN_DATASETS="$srcdir/tests/fixtures" run "$TRAINRUN" "$srcdir/recipes/resnet.yaml" \
  data.dataset=parity-image model.layers=1 model.hidden=4 train.batch_size=32 train.steps=5 \
  '~train.epochs' report.dir="$scratch" --quiet
expect_rc 0 "resnet"
for file in "$scratch"/mlp/latest/checkpoints/step-50.safetensors \
  "$scratch"/resnet/latest/checkpoints/step-5.safetensors; do
  checks=$((checks + 1))
  "$python" "$srcdir/tests/checkpoint_check.py" "$file" || fail "safetensors cannot read $file"
done
finish
