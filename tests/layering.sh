#!/bin/sh
# Layering as an administrator and a user set it up: system conf < user conf < recipe (and
# what it extends) < overrides, each value's origin shown by check; conf file locations.
. "$srcdir/tests/lib.sh"
cd "$scratch"
mkdir -p etc home/.config/trainrun xdg/trainrun recipes

cat >etc/trainrun.conf <<'YAML'
budget:
  memory: 8GiB
report: {dir: /srv/runs}
seed: 7
YAML
cat >home/.config/trainrun/trainrun.conf <<'YAML'
budget: {memory: 6GiB}
YAML
cat >xdg/trainrun/trainrun.conf <<'YAML'
budget: {memory: 5GiB}
YAML
cat >recipes/base.yaml <<'YAML'
model: {arch: mlp, layers: 3}
data: {dataset: digits}
seed: 11
YAML
cat >recipes/child.yaml <<'YAML'
extends: base.yaml
model:
  layers: 4
YAML

value() { echo "$out" | grep "^ *$1:" | head -n 1; }

# The system conf alone.
HOME=$scratch/home TRAINRUN_SYSTEM_CONF=$scratch/etc/trainrun.conf TRAINRUN_CONF= \
  run "$TRAINRUN" check recipes/child.yaml
expect_rc 0 "system conf"
expect_in "$(value dir)" "dir: /srv/runs" "system conf value"
expect_in "$(value dir)" "# conf $scratch/etc/trainrun.conf:3:15" "system conf origin"
expect_in "$(value memory)" "memory: 8GiB" "system conf memory"

# The user conf in ~/.config overrides the system conf.
unset XDG_CONFIG_HOME TRAINRUN_CONF
HOME=$scratch/home TRAINRUN_SYSTEM_CONF=$scratch/etc/trainrun.conf run "$TRAINRUN" check recipes/child.yaml
expect_rc 0 "user conf"
expect_in "$(value memory)" "memory: 6GiB" "user conf wins over system conf"
expect_in "$(value memory)" "home/.config/trainrun/trainrun.conf:1:18" "user conf origin"

# XDG_CONFIG_HOME moves the user conf.
XDG_CONFIG_HOME=$scratch/xdg HOME=$scratch/home TRAINRUN_SYSTEM_CONF=$scratch/etc/trainrun.conf \
  run "$TRAINRUN" check recipes/child.yaml
expect_in "$(value memory)" "memory: 5GiB" "XDG_CONFIG_HOME"

# TRAINRUN_CONF names the user conf; a named file that is missing is an error.
TRAINRUN_CONF=$scratch/xdg/trainrun/trainrun.conf HOME=$scratch/home TRAINRUN_SYSTEM_CONF= \
  run "$TRAINRUN" check recipes/child.yaml
expect_in "$(value memory)" "memory: 5GiB" "TRAINRUN_CONF"
TRAINRUN_CONF=$scratch/nowhere.conf TRAINRUN_SYSTEM_CONF= run "$TRAINRUN" check recipes/child.yaml
expect_rc 2 "a missing TRAINRUN_CONF"
expect_in "$err" "cannot read $scratch/nowhere.conf: No such file or directory" "missing conf named"

# The recipe wins over conf files; what it extends comes first; the seed from base.yaml beats
# the system conf's, and the child's layers beat the base's.
TRAINRUN_SYSTEM_CONF=$scratch/etc/trainrun.conf TRAINRUN_CONF= run "$TRAINRUN" check recipes/child.yaml
expect_in "$(value seed)" "seed: 11" "extends beats conf"
expect_in "$(value seed)" "recipes/base.yaml:3:7" "base origin"
expect_in "$(value layers)" "layers: 4" "child beats base"
expect_in "$(value layers)" "recipes/child.yaml:3:11" "child origin"

# Overrides beat everything; ~key goes back to the built-in default, whatever the layers said.
TRAINRUN_SYSTEM_CONF=$scratch/etc/trainrun.conf TRAINRUN_CONF= \
  run "$TRAINRUN" check recipes/child.yaml budget.memory=3GiB '~seed'
expect_in "$(value memory)" "memory: 3GiB" "override"
expect_in "$(value memory)" "# override" "override origin"
expect_in "$(value seed)" "seed: 1234" "reset to default"
expect_in "$(value seed)" "reset by override ~seed" "reset origin"

# A conf file may not extend; a bad key in a conf file is placed in that file.
printf 'extends: other.yaml\ntrain: {batchsize: 3}\n' >etc/bad.conf
TRAINRUN_SYSTEM_CONF=$scratch/etc/bad.conf TRAINRUN_CONF= run "$TRAINRUN" check recipes/child.yaml
expect_rc 2 "bad conf"
expect_in "$err" "etc/bad.conf:1:1: extends is read only in recipe files" "extends in conf"
expect_in "$err" "etc/bad.conf:2:9: unknown key 'train.batchsize'; did you mean 'train.batch_size'?" "conf typo"

# A conf path longer than a path can be is refused, never cut to another file's name.
long=$(printf 'conf/%.0s' $(seq 900))trainrun.conf
TRAINRUN_SYSTEM_CONF=$scratch/etc/trainrun.conf TRAINRUN_CONF=$long run "$TRAINRUN" check recipes/child.yaml
expect_rc 2 "a conf path too long"
expect_in "$err" "path too long (4513 bytes; at most 4095)" "the refusal"

# The shipped etc/trainrun.conf is valid as it is.
TRAINRUN_SYSTEM_CONF=$srcdir/etc/trainrun.conf TRAINRUN_CONF= run "$TRAINRUN" check recipes/child.yaml
expect_rc 0 "the shipped trainrun.conf"
finish
