#!/bin/sh
# Two hosts: two network namespaces joined by a veth pair stand for two machines (each its own
# address, nothing shared but the file system, as a cluster's NFS), Open MPI starting the remote
# rank through a launch agent that enters the other namespace where a cluster would ssh, and the
# ranks talking over TCP only. 2 ranks, one a host, train mlp as one process replaying their plan
# does (the same losses within 1e-6); then the second host drops off the network mid-run (its
# link down: no process dies, nothing answers) and every rank ends within distributed.timeout
# + 10 s, the one that waited saying so with status 10, the checkpoints written whole.
# Skipped (77) without mpirun, a build with MPI, or the right to make network namespaces (root,
# iproute2).
. "$srcdir/tests/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no ip (iproute2)"; exit 77; }
"$TRAINRUN" --version | grep -q "^Ranks: across processes over MPI" || { echo "SKIP: built without MPI"; exit 77; }
a=trh$$a b=trh$$b net=10.254.77
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$scratch"; }
trap cleanup EXIT
ip netns add "$a" 2>/dev/null && ip netns add "$b" 2>/dev/null ||
  { echo "SKIP: cannot make network namespaces here (root and CAP_NET_ADMIN needed)"; exit 77; }
ip link add "v$a" type veth peer name "v$b" && ip link set "v$a" netns "$a" && ip link set "v$b" netns "$b" &&
  ip -n "$a" addr add "$net.1/24" dev "v$a" && ip -n "$b" addr add "$net.2/24" dev "v$b" &&
  ip -n "$a" link set "v$a" up && ip -n "$b" link set "v$b" up &&
  ip -n "$a" link set lo up && ip -n "$b" link set lo up || { echo "FAIL: the two hosts' network"; exit 1; }
# The launch agent: what ssh is to a cluster, `ip netns exec` here.
cat >"$scratch/agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1
shift
case \$host in $net.1) ns=$a ;; $net.2) ns=$b ;; *) echo "agent: no host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
chmod +x "$scratch/agent"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 TRAINRUN_DATASETS=$scratch/datasets
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMP_NUM_THREADS TRAINRUN_DATASETS
"$srcdir/bench/gpu/datasets" "$TRAINRUN_DATASETS" >/dev/null || { echo "FAIL: bench/gpu/datasets"; exit 1; }
# hosts LABEL KEYS...: 2 ranks, one on each host, training mlp into $scratch/LABEL.
hosts() {
  label=$1
  shift
  timeout 300 ip netns exec "$a" mpirun --mca plm_rsh_agent "$scratch/agent" --host "$net.1,$net.2" -np 2 \
    --mca btl tcp,self --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" \
    -x OMP_NUM_THREADS -x TRAINRUN_DATASETS -x XDG_CACHE_HOME -x TRAINRUN_DEVICES \
    "$TRAINRUN" "$srcdir/recipes/mlp.yaml" report.dir="$scratch/$label" train.eval_samples=64 "$@" --quiet
}

run hosts two train.steps=40 report.log_every=1
expect_rc 0 "2 ranks on 2 hosts"
two=$(echo "$scratch/two"/*/latest)
expect_in "$(cat "$two/log.txt")" "ranks: 2 (started by mpirun)" "the log names the ranks"
checks=$((checks + 1))
grep -q '"launcher": "mpirun"' "$two/run.json" || fail "run.json: the ranks"
run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=40 report.log_every=1 train.eval_samples=64 \
  report.dir="$scratch/one" --plan "$two/plan.json" --quiet
expect_rc 0 "one process replaying the 2 hosts' plan"
one=$(echo "$scratch/one"/*/latest)
same_losses "$one" "$two" "2 hosts over TCP" 1e-6 40

# The second host drops off the network once step 1000 is checkpointed.
hosts gone train.steps=1000000 train.eval_every=0 train.checkpoint_every=1000 distributed.timeout=5s \
  >"$scratch/gone.out" 2>"$scratch/gone.err" &
launcher=$!
i=0
while [ ! -e "$scratch/gone/mlp/latest/checkpoints/step-1000.safetensors" ] && [ $i -lt 1200 ]; do
  sleep 0.1
  i=$((i + 1))
done
began=$(date +%s)
ip -n "$b" link set "v$b" down
# the ranks (the processes of trainrun itself, on both hosts), not mpirun: it may wait for the
# lost host's daemon until TCP gives up (trainrun(1))
i=0
while pgrep -f "^$TRAINRUN .*report.dir=$scratch/gone" >/dev/null && [ $i -lt 600 ]; do
  sleep 0.1
  i=$((i + 1))
done
took=$(($(date +%s) - began))
i=0
while kill -0 "$launcher" 2>/dev/null && [ $i -lt 50 ]; do
  sleep 0.1
  i=$((i + 1))
done
launcher_took=$(($(date +%s) - began))
pkill -9 -f "report.dir=$scratch/gone" 2>/dev/null
wait "$launcher"
rc=$?
checks=$((checks + 1))
[ "$took" -le 15 ] || fail "a host gone: the ranks ended after $took s, more than distributed.timeout + 10 s"
checks=$((checks + 1))
grep -q "no answer from the other ranks" "$scratch/gone.err" ||
  fail "a host gone: no rank said it waited: $(tail -n 3 "$scratch/gone.err")"
echo "a host gone: the ranks ended after $took s; mpirun after ${launcher_took} s (status $rc; 137: still waiting, killed)"
checks=$((checks + 1))
python3 - "$scratch/gone/mlp/latest/checkpoints/step-1000.safetensors" <<'PY' || fail "a host gone: the checkpoint is damaged"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    json.loads(f.read(n))
PY
finish
