#!/bin/sh
# A real memory cgroup (tests/limits.sh reads a fake tree): a child of this process's cgroup
# with a 256 MiB limit — cgroup v2's memory.max where the memory controller is on v2, else
# v1's memory.limit_in_bytes — and `trainrun plan` run inside it plans within it and says so;
# at 32 MiB nothing fits (exit 3). Needs root and a writable hierarchy: skips (77) elsewhere.
. "$srcdir/tests/lib.sh"
recipes=$srcdir/recipes
[ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 77; }

# The hierarchy to use: v2 with the memory controller, else v1's memory one.
mount_of() {   # mount_of TYPE [OPTION]: the mount point of that cgroup hierarchy
  awk -v t="$1" -v o="${2:-}" '{ for (i = 1; i <= NF; i++) if ($i == "-") break;
    if ($(i + 1) == t && (o == "" || index($(i + 3), o))) { print $5; exit } }' /proc/self/mountinfo
}
v2=$(mount_of cgroup2)
if [ -n "$v2" ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null; then
  root=$v2 rel=$(sed -n 's/^0:://p' /proc/self/cgroup) file=memory.max
else
  root=$(mount_of cgroup memory) rel=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup) file=memory.limit_in_bytes
fi
[ -n "$root" ] || { echo "SKIP: no memory cgroup hierarchy"; exit 77; }
[ "$rel" = / ] && rel=
parent=$root$rel
child=$parent/trainrun-test.$$
mkdir "$child" 2>/dev/null || { echo "SKIP: cannot make a cgroup under $parent"; exit 77; }
[ "$file" = memory.max ] && [ ! -e "$child/memory.max" ] &&
  { rmdir "$child"; echo "SKIP: the memory controller is not enabled for $parent's children"; exit 77; }
trap 'rmdir "$child" 2>/dev/null; rm -rf "$scratch"' EXIT
echo $((256 * 1048576)) >"$child/$file" || { echo "SKIP: cannot set $child/$file"; exit 77; }

# in_cgroup CMD...: runs CMD inside the child cgroup (run's $out, $err, $rc).
in_cgroup() {
  run sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$child" "$@"
}

in_cgroup "$TRAINRUN" plan "$recipes/mlp.yaml" budget.memory=2GiB
expect_rc 0 "plan in a 256 MiB cgroup"
expect_in "$out" "$file of cgroup $rel/trainrun-test.$$ is 256.00 MiB" "plan names the cgroup's limit"
expect_in "$out" "below the budget 2.00 GiB" "and plans within it"

echo $((32 * 1048576)) >"$child/$file"
in_cgroup "$TRAINRUN" plan "$recipes/mlp.yaml" budget.memory=2GiB
expect_rc 3 "plan in a 32 MiB cgroup: nothing fits"
expect_in "$out" "$file (32.00 MiB) would have to be at least" "names what would do"
finish
