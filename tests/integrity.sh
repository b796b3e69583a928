#!/bin/sh
# A run's files as a hostile or unlucky user leaves them, and what trainrun does with them:
# checkpoint metadata rewritten by hand (the step, the trainer's state, the format) is caught by
# the checksum and passed over, the file kept aside, never overwritten; an edited recipe.yaml
# or checkpoints of another model make a resume refuse (exit 2) naming what differs, leaving
# every file as it was; a symbolic link where the run writes (.lock, log.txt, metrics.jsonl)
# is refused and its target untouched; a disk full at start leaves no temporary behind and a
# folder that resume calls never started (a small tmpfs, when this test may mount one).
. "$srcdir/tests/lib.sh"
recipe="$srcdir/recipes/mlp.yaml"
set -- train.steps=60 train.checkpoint_every=10 data.num_workers=0 --quiet
"$TRAINRUN" "$recipe" report.dir="$scratch/ref" "$@" >/dev/null || fail "the reference run"
ref=$(cd "$scratch/ref/mlp/latest" && pwd -P)

# copy NAME: a copy of the reference run's recipe folder; prints the run folder's path.
copy() {
  cp -a "$scratch/ref" "$scratch/$1"
  echo "$scratch/$1/mlp/$(basename "$ref")"
}

# tamper FILE KEY VALUE: sets __metadata__[KEY] in a safetensors header, the tensors untouched
# (KEY "stopped": the trainer state's stopped=0 becomes stopped=1).
tamper() {
  python3 - "$@" <<'PY'
import json, struct, sys
path, key, value = sys.argv[1:4]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header["__metadata__"]
if key == "stopped":
    assert "stopped=0" in meta["trainrun.trainer_state"], meta
    meta["trainrun.trainer_state"] = meta["trainrun.trainer_state"].replace("stopped=0", "stopped=1")
else:
    meta[key] = value
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * ((8 - len(text) % 8) % 8)
open(path, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
}

# fingerprint DIR: every file under DIR with its SHA-256 (what "left as it was" compares).
fingerprint() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum); }

# ---- rewritten metadata: passed over as damaged, kept aside, the run goes on from step 50 ----
n=0
for change in "trainrun.step 99999" "trainrun.step abc" "trainrun.step -5" "trainrun.optimizer_step 70" \
              "stopped x" "trainrun.recipe other"; do
  n=$((n + 1))
  dir=$(copy "t$n")
  # shellcheck disable=SC2086
  tamper "$dir/checkpoints/step-60.safetensors" $change
  cp "$dir/checkpoints/step-60.safetensors" "$scratch/tampered"
  run "$TRAINRUN" resume "$dir"
  expect_rc 0 "resume past a checkpoint whose $change"
  expect_in "$out" "skipped damaged checkpoints: $dir/checkpoints/step-60.safetensors" "$change: passed over"
  expect_in "$out" "resuming $dir at step 50 of 60" "$change: the one before is used"
  checks=$((checks + 2))
  cmp -s "$scratch/tampered" "$dir/checkpoints/step-60.safetensors.damaged" ||
    fail "$change: the damaged file is not kept as step-60.safetensors.damaged"
  cmp -s "$ref/checkpoints/step-60.safetensors" "$dir/checkpoints/step-60.safetensors" ||
    fail "$change: resumed from step 50, the new step 60 differs from the uninterrupted run's"
done
dir=$(copy step)
tamper "$dir/checkpoints/step-60.safetensors" trainrun.step 99999
run "$TRAINRUN" resume "$dir"
expect_in "$out" "trainrun.step is '99999', not the step 60 its name says" "the step's field is named"

# ---- a format 1 header (no checksum over the metadata): refused, nothing changed ----
dir=$(copy format1)
tamper "$dir/checkpoints/step-60.safetensors" trainrun.format_version 1
before=$(fingerprint "$dir")
run "$TRAINRUN" resume "$dir"
expect_rc 2 "resume from a checkpoint of format 1"
expect_in "$err" "checkpoint format 1" "the format is named"
expect_in "$err" "no checkpoint was moved or overwritten" "the refusal says nothing changed"
checks=$((checks + 1))   # log.txt has the refusal's line added
[ "$(echo "$before" | grep -v ' ./log.txt$')" = "$(fingerprint "$dir" | grep -v ' ./log.txt$')" ] ||
  fail "a refused resume changed the run folder"

# ---- recipe.yaml edited: refused before anything is touched, the key and both values named ----
dir=$(copy edited)
sed -i 's/hidden: 256/hidden: 128/' "$dir/recipe.yaml"
before=$(fingerprint "$dir")
run "$TRAINRUN" resume "$dir"
expect_rc 2 "resume after recipe.yaml was edited"
expect_in "$err" "$dir/recipe.yaml is not the recipe this run began with" "the file is named"
expect_in "$err" "model.hidden is 128, was 256" "the key and both values are named"
checks=$((checks + 1))
[ "$before" = "$(fingerprint "$dir")" ] || fail "a resume refused for an edited recipe changed the run folder"

# The same with a plan.json that keeps no recipe (an older trainrun's): the checkpoints' shapes
# refuse it, naming the tensor and both shapes; every checkpoint is left as it was.
python3 - "$dir/plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
del plan["recipe"]
json.dump(plan, open(sys.argv[1], "w"), indent=2)
PY
before=$(fingerprint "$dir/checkpoints")
run "$TRAINRUN" resume "$dir"
expect_rc 2 "resume onto checkpoints of another model"
expect_in "$err" "step-60.safetensors: fc0.weight is F32 [256, 64] in the checkpoint but F32 [128, 64]" \
  "the tensor and both shapes are named"
checks=$((checks + 1))
[ "$before" = "$(fingerprint "$dir/checkpoints")" ] || fail "a refused resume changed the checkpoints"
checks=$((checks + 1))
[ "$(wc -l <"$dir/metrics.jsonl")" = "$(wc -l <"$ref/metrics.jsonl")" ] || fail "a refused resume added metrics"

# ---- a FIFO named like the newest checkpoint: passed over at once, not read ----
dir=$(copy fifo)
mkfifo "$dir/checkpoints/step-70.safetensors"
run timeout 120 "$TRAINRUN" resume "$dir"
expect_rc 0 "resume past a FIFO"
expect_in "$out" "step-70.safetensors: not a regular file" "the FIFO is named"
expect_in "$out" "resuming $dir at step 60 of 60" "the newest real checkpoint is used"

# ---- links where the run writes: refused, exit 1, the target untouched ----
echo precious >"$scratch/victim"
mkdir -p "$scratch/links/mlp"
ln -s "$scratch/victim" "$scratch/links/mlp/.lock"
run "$TRAINRUN" "$recipe" report.dir="$scratch/links" "$@"
expect_rc 1 "a .lock that is a symbolic link"
expect_in "$err" "$scratch/links/mlp/.lock: it is a symbolic link" "the lock's path is named"
for file in log.txt metrics.jsonl; do
  dir=$(copy "link-$file")
  rm "$dir/$file" && ln -s "$scratch/victim" "$dir/$file"
  run "$TRAINRUN" resume "$dir"
  expect_rc 1 "resume with $file a symbolic link"
  expect_in "$err" "$dir/$file: it is a symbolic link" "$file is named"
done
checks=$((checks + 1))
[ "$(cat "$scratch/victim")" = precious ] || fail "a link's target was written"

# ---- a full disk at start: no temporaries, no half file, a folder resume calls never started ----
mnt="$scratch/full"
mkdir "$mnt"
if mount -t tmpfs -o size=8k tmpfs "$mnt" 2>/dev/null; then
  trap 'umount "$mnt" 2>/dev/null; rm -rf "$scratch"' EXIT
  for size in 8k 16k 40k; do
    mount -o remount,size=$size "$mnt" && rm -rf "${mnt:?}"/*
    run "$TRAINRUN" "$recipe" report.dir="$mnt" "$@"
    checks=$((checks + 1))
    [ "$rc" != 0 ] || fail "a disk of $size: the run did not fail"
    expect_in "$err" "No space left on device" "a disk of $size: the failure is said"
    checks=$((checks + 1))
    [ -z "$(find "$mnt" -name '*.tmp.*')" ] || fail "a disk of $size: temporaries left: $(find "$mnt" -name '*.tmp.*')"
    for f in $(find "$mnt" -name recipe.yaml -o -name plan.json); do
      checks=$((checks + 1))
      [ -s "$f" ] || fail "a disk of $size: $f is empty"
    done
    for d in "$mnt"/mlp/2*; do
      [ -d "$d" ] && [ ! -e "$d/run.json" ] || continue
      run "$TRAINRUN" resume "$d"
      expect_rc 2 "a disk of $size: resume of the folder that never started"
      expect_in "$err" "$d never started" "a disk of $size: resume says so"
      checks=$((checks + 1))
      [ "$(readlink "$mnt/mlp/latest" 2>/dev/null)" != "$(basename "$d")" ] || fail "latest names a folder never started"
    done
  done
  umount "$mnt"
else
  echo "note: cannot mount a tmpfs here (not root?): the full-disk cases were not run"
fi
finish
