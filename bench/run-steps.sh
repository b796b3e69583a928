#!/bin/sh
# Every shipped recipe's training step in trainrun and in PyTorch 1.13 (bench/steps.py), fp32
# and bf16, the same threads, interleaved round by round in one run (trainrun, PyTorch,
# trainrun, PyTorch …): each side's items a second from its median step (tokens for the
# transformers, images for the ResNet, samples for the MLP), the peak resident memory of each
# process, and both sides' parameter counts (the models must be the same). Prints a table and
# writes it as TSV.
#
#   bench/run-steps.sh [-t THREADS] [-r ROUNDS] [-w WARMUP] [-s STEPS] [-b BF16_STEPS]
#                      [-T TIMEOUT_S] [-d "fp32 bf16"] [-o TSV] [-p] [RECIPE …]
#   RECIPE: mlp resnet bert-small gpt-small bert-base (default: all five); from the checkout,
#   after building trainrun. -p: after the rounds, PyTorch's profile of each step (steps.py
#   --profile). Defaults: threads nproc, 3 rounds, 3 warm-up + 8 timed steps (bf16: 1 + 3),
#   600 s per process, TSV bench/steps.tsv.
#
# trainrun's side is the real binary: `trainrun RECIPE … --quiet` with train.steps, the batch and
# the sequence set by overrides, every optimize: knob pinned (amp off or bf16, no checkpointing,
# no accumulation, no length buckets) so that both sides do the same work, evaluation and
# checkpoints off, report.log_every=1; its step is metrics.jsonl's time/wall of each step (data,
# feeding, forward, backward, clipping, the optimizer, the record), the median past the warm-up
# (it runs one step more: the last step's record holds the test pass and is left out).
# The BERT recipes train on austen-passages (bench/gpu/datasets: every passage at least 512
# WordPiece tokens, so every batch is full B × S, as PyTorch's random tokens are) instead of
# WordNet's glosses, whose lengths vary; 6 classes instead of 45. BERT-base runs at batch 2 ×
# sequence 512. A process past TIMEOUT_S is killed and its cell says "timeout" (PyTorch's bf16
# on a CPU without AVX-512 BF16 falls back to slow kernels: minutes a step).
set -eu
threads=$(nproc) rounds=3 warmup=3 steps=8 bf16_steps=3 limit=600 dtypes="fp32 bf16" tsv= profile=0
while getopts t:r:w:s:b:T:d:o:p opt; do
  case $opt in
    t) threads=$OPTARG ;; r) rounds=$OPTARG ;; w) warmup=$OPTARG ;; s) steps=$OPTARG ;;
    b) bf16_steps=$OPTARG ;; T) limit=$OPTARG ;; d) dtypes=$OPTARG ;; o) tsv=$OPTARG ;; p) profile=1 ;;
    *) sed -n '9,12p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- mlp resnet bert-small gpt-small bert-base
recipes="$*"
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
tsv=${tsv:-bench/steps.tsv}
py=/usr/bin/python3   # PyTorch 1.13 (not the pyenv python3 first on PATH)
work=$(mktemp -d "${TMPDIR:-/tmp}/trainrun-steps.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# The BLAS kernels trainrun picks for this CPU (src/backend/cpu/blas.c), for PyTorch's BLAS too.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$(./trainrun --version | sed -n 's/^CPU backend: OpenBLAS \(.*\) kernels.*/\1/p')}"
sh bench/gpu/datasets "$work/datasets" >/dev/null
# Calibrate first, so that no round's trainrun runs the planner's calibration child (its probes
# peak near 175 MiB, which wait4 would count as the run's RSS).
./trainrun calibrate >/dev/null 2>&1 || ./trainrun calibrate --tolerance 25 >/dev/null 2>&1 || true
export TRAINRUN_DATASETS="$work/datasets"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
isa=$(for f in avx2 avx512f avx512_bf16 amx_bf16 avx512_fp16; do
        grep -m 1 '^flags' /proc/cpuinfo | grep -qw "$f" && printf '%s ' "$f"; done; true)
isa=${isa% }
echo "cpu: $cpu; isa: ${isa:-none of avx2/avx512f/avx512_bf16/amx_bf16/avx512_fp16}; onednn max isa:" \
  "${ONEDNN_MAX_CPU_ISA:-${DNNL_MAX_CPU_ISA:-not set}}; threads=$threads blas=$OPENBLAS_CORETYPE" \
  "torch=$($py -c 'import torch; print(torch.__version__)'); rounds=$rounds steps=$warmup+$steps" \
  "(bf16 1+$bf16_steps); $(date -u +%Y-%m-%dT%H:%MZ)"

# A recipe's file and the overrides both sides take (steps.py ignores optimize.* and the rest).
recipe_of() {
  case $1 in
    mlp) echo "recipes/mlp.yaml" ;;
    resnet) echo "recipes/resnet.yaml" ;;
    bert-small) echo "recipes/bert-small.yaml data.dataset=austen-passages" ;;
    gpt-small) echo "recipes/gpt-small.yaml" ;;
    bert-base) echo "recipes/bert.yaml data.dataset=austen-passages train.batch_size=2 model.max_len=512" ;;
    *) return 1 ;;
  esac
}
for name in $recipes; do
  recipe_of "$name" >/dev/null || { echo "run-steps.sh: no recipe $name (mlp resnet bert-small gpt-small bert-base)" >&2; exit 2; }
done
field() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" | head -n 1; }
# the middle value, or the mean of the two middle ones
median() {
  [ $# -gt 0 ] && printf '%s\n' "$@" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }' ||
    echo timeout
}
max() { [ $# -gt 0 ] && printf '%s\n' "$@" | sort -g | tail -n 1 || echo -; }

printf 'recipe\tdtype\tunit\ttrainrun_per_s\tpytorch_per_s\tspeed_ratio\ttrainrun_rss_mib\tpytorch_rss_mib\trss_ratio\ttrainrun_params\tpytorch_params\ttrainrun_step_ms\tpytorch_step_ms\n' >"$work/table.tsv"
for name in $recipes; do
  set -- $(recipe_of "$name")
  file=$1; shift
  for dtype in $dtypes; do
    w=$warmup n=$steps amp=off
    [ "$dtype" = bf16 ] && w=1 n=$bf16_steps amp=bf16
    ours= theirs= ours_ms= theirs_ms= ours_rss= theirs_rss= ours_params=? theirs_params=? unit=tokens
    case $name in mlp) unit=samples ;; resnet) unit=images ;; esac
    for r in $(seq "$rounds"); do
      dir="$work/runs/$name-$dtype-$r"
      out=$($py bench/steps.py --exec "$limit" ./trainrun "$file" "$@" device=cpu train.steps=$((w + n + 1)) \
              train.eval_every=0 train.checkpoint_every=0 train.eval_samples=8 optimize.amp=$amp \
              optimize.checkpointing=off optimize.accumulation=1 optimize.dynamic_batching=off \
              report.log_every=1 report.tensorboard=false report.dir="$dir" name=step --quiet 2>&1 || true)
      rss=$(echo "$out" | field peak_rss_mib)
      if echo "$out" | grep -q '^exec: rc=0 '; then
        line=$($py bench/steps.py --metrics "$dir/step/latest" "$w")
        ours="$ours $(echo " $line" | field items_per_s)" ours_ms="$ours_ms $(echo " $line" | field step_ms)"
        echo "$name $dtype round $r: trainrun $line" >&2
        ours_rss="$ours_rss $rss"
      else
        echo "$name $dtype round $r: trainrun: $(echo "$out" | tail -n 3 | tr '\n' ' ')" >&2
      fi
      ckpt=$(ls "$dir"/step/latest/checkpoints/*.safetensors 2>/dev/null | head -n 1 || true)
      out=$($py bench/steps.py --exec "$limit" $py bench/steps.py "$file" "$@" --dtype "$dtype" --threads "$threads" \
              --warmup "$w" --steps "$n" ${ckpt:+--checkpoint "$ckpt"} 2>&1 || true)
      if echo "$out" | grep -q '^exec: rc=0 '; then
        line=$(echo "$out" | grep '^pytorch ')
        theirs="$theirs $(echo " $line" | field items_per_s)" theirs_ms="$theirs_ms $(echo " $line" | field step_ms)"
        theirs_rss="$theirs_rss $(echo "$out" | field peak_rss_mib)"
        theirs_params=$(echo " $line" | field params)
        echo "$name $dtype round $r: $line" >&2
      else
        echo "$name $dtype round $r: pytorch: $(echo "$out" | tail -n 3 | tr '\n' ' ')" >&2
      fi
      p=$(echo "$out" | sed -n 's/^params: trainrun \([0-9]*\) .*/\1/p')
      [ -z "$p" ] || ours_params=$p
      echo "$out" | grep -q 'DIFFERENT shapes' && echo "$name: $(echo "$out" | grep '^params:')" >&2
      rm -rf "$dir"
    done
    a=$(median $ours) b=$(median $theirs) ra=$(max $ours_rss) rb=$(max $theirs_rss)
    ratio() { case "$1$2" in *timeout*|*-*) echo - ;; *) echo "$1 $2" | awk '{printf "%.2f", $1 / $2}' ;; esac; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$dtype" "$unit" "$a" "$b" "$(ratio "$a" "$b")" \
      "$ra" "$rb" "$(ratio "$ra" "$rb")" "$ours_params" "$theirs_params" "$(median $ours_ms)" "$(median $theirs_ms)" \
      >>"$work/table.tsv"
    echo "$name $dtype: trainrun $unit/s [$ours ] pytorch [$theirs ]" >&2
  done
done
cp "$work/table.tsv" "$tsv"
column -t -s "$(printf '\t')" "$tsv" 2>/dev/null || cat "$tsv"
echo "(speed_ratio: trainrun's items/s over PyTorch's, medians of $rounds interleaved rounds; rss_ratio: trainrun's peak" \
  "RSS over PyTorch's, the larger of the rounds; TSV: $tsv)"

# Where PyTorch's step goes: torch.profiler over its timed steps, the top ops by self CPU time
# and the share in GEMM and convolution kernels (the issue's "≥ 75% in the same kernels").
if [ "$profile" = 1 ]; then
  for name in $recipes; do
    set -- $(recipe_of "$name")
    file=$1; shift
    for dtype in $dtypes; do
      w=$warmup n=$steps
      [ "$dtype" = bf16 ] && w=1 n=$bf16_steps
      echo "== PyTorch's profile: $name $dtype"
      $py bench/steps.py --exec "$limit" $py bench/steps.py "$file" "$@" --dtype "$dtype" --threads "$threads" \
        --warmup "$w" --steps "$n" --profile || true
    done
  done
fi
