#!/bin/sh
# The scheduling examples an administrator copies (etc/cron.d, etc/systemd): the cron job is
# one valid line per job with its user and a PATH, its command parses; the systemd units pass
# systemd-analyze verify where it exists, and count exactly "unchanged" and "locked" from
# src/core/exit.h as success — a regression must stay a failure, so that it alerts.
. "$srcdir/tests/lib.sh"
cron=$srcdir/etc/cron.d/trainrun
service=$srcdir/etc/systemd/trainrun@.service
timer=$srcdir/etc/systemd/trainrun@.timer
status_of() { sed -n "s/^ *$1 *= *\([0-9]*\).*/\1/p" "$srcdir/src/core/exit.h"; }
unchanged=$(status_of TR_EXIT_UNCHANGED)
locked=$(status_of TR_EXIT_LOCKED)
regression=$(status_of TR_EXIT_REGRESSION)

# cron: variables, then jobs of "m h dom mon dow user command"; each command parses as sh.
expect_in "$(grep '^PATH=' "$cron")" "/usr/local/bin" "the cron file sets a PATH with trainrun in it"
jobs=$(grep -v -e '^#' -e '^ *$' -e '^[A-Z_]*=' "$cron")
expect_in "$jobs" "trainrun /srv/recipes/bert.yaml --resume auto --if-data-changed" "the nightly command"
echo "$jobs" | while read -r m h dom mon dow user command; do
  [ "$user" = trainrun ] || echo "FAIL: a cron job runs as '$user', not trainrun: $m $h $dom $mon $dow $user"
  sh -n -c "$command" || echo "FAIL: a cron job's command does not parse: $command"
  case "$command" in *%*) echo "FAIL: cron turns % into a newline: $command" ;; esac
done >"$scratch/cron.fail"
checks=$((checks + 1))
[ ! -s "$scratch/cron.fail" ] || fail "$(cat "$scratch/cron.fail")"

# systemd: exit statuses, the timer's keys, and systemd's own reading of both units.
expect_in "$(grep '^SuccessExitStatus=' "$service")" "SuccessExitStatus=$unchanged $locked" \
  "7 (unchanged) and 75 (locked) are not failures"
expect_not_in "$(grep '^SuccessExitStatus=' "$service")" " $regression" "a regression stays a failure"
expect_in "$(grep '^Type=' "$service")" "Type=oneshot" "a oneshot service"
expect_in "$(cat "$timer")" "Persistent=true" "a night missed while off runs later"
expect_in "$(cat "$timer")" "RandomizedDelaySec=" "the timer spreads its start"
if command -v systemd-analyze >/dev/null; then
  mkdir "$scratch/units"
  # An instance, with a program that exists here: verify checks ExecStart= can run.
  sed 's|^ExecStart=/usr/local/bin/trainrun|ExecStart=/bin/true|' "$service" >"$scratch/units/trainrun@bert.service"
  cp "$timer" "$scratch/units/trainrun@bert.timer"
  verify=$(cd "$scratch/units" && systemd-analyze verify --man=no ./trainrun@bert.timer ./trainrun@bert.service 2>&1)
  checks=$((checks + 1))
  [ -z "$verify" ] || fail "systemd-analyze verify: $verify"
else
  echo "systemd-analyze not found: the units are not verified"
fi
finish
