#!/bin/sh
# oneDNN forced to lower instruction sets (ONEDNN_MAX_CPU_ISA), as CI runs the CPUs it may
# meet: AVX2, and AVX-512 without AMX or BF16. Under each, the oneDNN (GEMM and convolution),
# kernel, convolution kernel and 16-bit kernel unit tests pass, --version names the set in
# effect, and a short MLP training with every GEMM on oneDNN (TR_CPU_GEMM=onednn) gives the same
# weights on 1 and 2 threads. On a CPU below the set
# forced oneDNN simply keeps to what the CPU has (this test then runs that set twice). Each set
# takes under a minute on two cores.
. "$srcdir/tests/lib.sh"
: "${top_builddir:?set top_builddir}"
"$TRAINRUN" --version | grep -q "oneDNN not built" && { echo "SKIP: built without oneDNN"; exit 77; }
for isa in AVX2 AVX512_CORE; do
  export ONEDNN_MAX_CPU_ISA=$isa
  for t in check_onednn check_onednn_conv check_kernels check_kernels_conv check_kernels_16bit; do
    run "$top_builddir/tests/$t"
    expect_rc 0 "$t under $isa"
  done
  run "$TRAINRUN" --version
  expect_rc 0 "--version under $isa"
  lower=$(echo "$isa" | tr 'A-Z' 'a-z')
  case "$lower" in avx2) expect_in "$out" "avx2 ISA" "--version names the capped set" ;; esac
  for threads in 1 2; do
    TR_CPU_GEMM=onednn OMP_NUM_THREADS=$threads run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" name=mlp \
      report.dir="$scratch/$isa-$threads" train.steps=40 train.checkpoint_every=0 train.eval_every=0 --quiet
    expect_rc 0 "mlp on oneDNN, $isa, $threads threads"
  done
  checks=$((checks + 1))
  cmp -s "$(ls "$scratch/$isa-1"/mlp/latest/checkpoints/*.safetensors)" \
    "$(ls "$scratch/$isa-2"/mlp/latest/checkpoints/*.safetensors)" ||
    fail "$isa: the weights after 1 and 2 threads differ with oneDNN's GEMMs"
done
finish
