#!/bin/sh
# Runs one libFuzzer harness of tests/fuzz/ (make fuzz-<reader>): its seeds gathered from the
# repository's own files, its input cap large enough to reach the reader's size and depth
# limits, a 2-second timeout so that super-linear inputs count as hangs, restarted after each
# finding so that one does not end the run: crashes, timeouts and out-of-memory inputs are all
# counted and kept under tests/fuzz/work/<reader>/artifacts/ (copy them to regressions-<reader>/).
# Usage: run.sh READER SECONDS [libFuzzer options]. Run from the build folder.
set -eu
reader=$1 seconds=$2
shift 2
src=$(cd "$(dirname "$0")/../.." && pwd)
fuzzer=tests/fuzz/fuzz_$reader
[ -x "$fuzzer" ] || { echo "run.sh: $fuzzer is not built (make $fuzzer)" >&2; exit 1; }
work=tests/fuzz/work/$reader
mkdir -p "$work/corpus" "$work/artifacts"

# seed FILE...: copies files into the corpus (skipping what is not there).
seed() {
    for f in "$@"; do [ -f "$f" ] && cp "$f" "$work/corpus/seed-$(basename "$(dirname "$f")")-$(basename "$f")"; done
    return 0
}
# seed_prefixed PREFIX FILE...: as seed, each file's bytes after the harness's option bytes.
seed_prefixed() {
    prefix=$1
    shift
    for f in "$@"; do
        [ -f "$f" ] || continue
        { printf "$prefix"; cat "$f"; } >"$work/corpus/seed-$(basename "$f")-$(printf %s "$prefix" | od -An -tx1 | tr -d ' \n')"
    done
}

max_len=1048577   # 1 MiB + 1: past the recipe and definition readers' size limit
dict=
len_control=100   # libFuzzer's default: inputs grow slowly

case $reader in
recipe)
    len_control=0   # at once up to max_len: deep nesting needs long inputs
    dict=$src/tests/fuzz/recipe.dict
    seed "$src"/recipes/*.yaml "$src"/etc/trainrun.conf ;;
dataset)
    len_control=0
    dict=$src/tests/fuzz/recipe.dict
    seed "$src"/datasets/*/dataset.yaml "$src"/tests/fixtures/*/dataset.yaml ;;
csv)
    max_len=65536   # past the tables' column and label limits and libcsv's buffer growth
    seed "$src"/datasets/iris-species/*.csv ;;
tsv | jsonl)
    ;;
text)
    max_len=262144   # GPT-2's BPE under ASan: ~1 s for 256 KiB of prose, so 2 s means super-linear
    head -c 100000 "$src/tests/fixtures/tokenizer/corpus.txt" >"$work/corpus.txt"
    seed_prefixed '\000\000\000\000\000' "$work/corpus.txt"
    seed_prefixed '\001\001\000\010\000' "$work/corpus.txt"
    seed_prefixed '\002\002\000\050\000' "$work/corpus.txt"
    gzip -dc "$src/datasets/austen/persuasion.txt.gz" | head -c 60000 >"$work/persuasion.txt"
    seed_prefixed '\002\000\000\000\000' "$work/persuasion.txt" ;;
idx)
    ;;
wordpiece)
    # BERT's whole vocab.txt (30,522 lines) takes 2.5 s under ASan to open three ways, and would
    # end every round as a timeout: its first 3,000 lines (make check replays it all).
    head -n 3000 "$src/datasets/vocab/bert-base-uncased/vocab.txt" >"$work/corpus/seed-bert-vocab-3000" ;;
bpe)
    # GPT-2's encoder.json and vocab.bpe together: 1.5 MB. They are not seeds: opening them takes
    # over 2 s under ASan on a loaded machine, and every round would end on them (make check
    # replays them, tests/fuzz-replay.sh); the seeds are small vocabularies of the same form.
    max_len=1600000 ;;
safetensors)
    seed "$src"/tests/fixtures/*.safetensors "$src"/tests/fixtures/hf/*/model.safetensors \
        "$src"/tests/fixtures/parity/*.safetensors ;;
plan)
    len_control=0
    seed "$src"/tests/fixtures/run-mlp/plan.json ;;
*)
    echo "run.sh: no harness for '$reader'" >&2
    exit 1 ;;
esac
# (Not the regressions: a hang kept there until its fix is merged would end every round.)
if [ -d "$src/tests/fuzz/seeds/$reader" ]; then
    cp "$src/tests/fuzz/seeds/$reader"/* "$work/corpus/"
fi

# libFuzzer stops at its first finding (kept in artifacts/): start it again, with the corpus it
# has grown, until the time is up. (Fork mode would reload the whole corpus in every job, which
# on a loaded machine leaves almost no time to fuzz.)
: >"$work/log.txt"
end=$(($(date +%s) + seconds))
rounds=0
while [ "$(date +%s)" -lt "$end" ]; do
    rounds=$((rounds + 1))
    echo "run.sh: round $rounds" >>"$work/log.txt"
    "$fuzzer" -max_total_time=$((end - $(date +%s))) -max_len="$max_len" -len_control="$len_control" -timeout=2 -rss_limit_mb=2048 \
        -malloc_limit_mb=2048 ${dict:+-dict="$dict"} -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$@" \
        "$work/corpus" >>"$work/log.txt" 2>&1 || true
done
# The executions of every round (its last "#N" line), the coverage of the last, the findings.
awk -v reader="$reader" '
    /^run.sh: round/ { total += last; last = 0 }
    /^#[0-9]+/ { n = substr($1, 2) + 0; if (n > last) last = n; for (i = 2; i < NF; i++) if ($i == "cov:") cov = $(i + 1) }
    /ERROR: libFuzzer: timeout/ { timeouts++ }
    /ERROR: libFuzzer: out-of-memory|ERROR: libFuzzer: malloc/ { ooms++ }
    /ERROR: AddressSanitizer|runtime error:|ERROR: libFuzzer: deadly signal|ERROR: LeakSanitizer|broken promise/ { crashes++ }
    END { total += last; printf "run.sh: %s: %d executions in %d rounds, coverage %d, crashes %d, timeouts %d, out of memory %d\n",
          reader, total, rounds, cov, crashes, timeouts, ooms }' rounds="$rounds" "$work/log.txt"
echo "run.sh: $reader: artifacts: $(ls "$work/artifacts" | wc -l) in $work/artifacts"
