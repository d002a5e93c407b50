#!/usr/bin/env bash
# Multi-host runs on test hosts (scripts/testhosts.sh: network namespaces joined by a bridge, real TCP
# between them). Usage: multihost_test.sh BUILD_DIR N. Exit 77 (ctest: skipped) where the machine does
# not allow network namespaces. Checks, each with a bound on its time:
#   1. ZeRO stages 1-3 and CPU offload across N hosts match the one-process loop (distributed_tests),
#      and every collective gives the exact result there, its waits sleeping (comm_tests);
#   2. ds-run --hostfile runs ds-train across the hosts with the same per-step losses (6 decimals) as N
#      ranks on one host, and the checkpoint it saved loads in one process;
#   3. 1% packet loss on one host's link (netem, or nftables where the kernel has no netem): the same
#      losses; a slow link (100 Mbit/s token bucket): the same losses;
#   4. a link cut mid-run: the job exits non-zero within a bound, naming the lost host;
#   5. a host killed mid-run (its processes SIGKILLed): the job exits non-zero within the bound and the
#      checkpoint named by `latest` still loads;
#   6. preemption: SIGTERM to ds-run reaches every rank on every host; they save and the job exits 0;
#   7. a host that cannot finish its part of that save: the others exit non-zero at the watchdog's bound
#      and `latest` is untouched.
set -uo pipefail
BUILD=$(readlink -f "${1:?build dir}")
N=${2:-2}
source "$(dirname "$(readlink -f "$0")")/common.sh"

# 1. The engine's equivalence tests across hosts.
t0=$(date +%s)
timeout 300 mpirun $OPTS --hostfile "$HOSTFILE" -np "$N" -x DS_COMM_TIMEOUT_S=60 "$BUILD/tests/runtime/distributed_tests" \
  --gtest_filter='Stage/ZeroStages.MatchOneProcessWithTheGlobalBatch/*:Stage/ZeroStages.CpuOffloadMatchesOneProcess/*:Stage3.WithoutOverlapMatches' \
  > "$WORK/equivalence.log" 2>&1 || { tail -40 "$WORK/equivalence.log"; fail "ZeRO across $N hosts does not match one process"; }
echo "ok 1: ZeRO 1/2/3 and CPU offload across $N hosts match the one-process loop ($(elapsed $t0) s)"

# 1b. Every collective across the hosts, where each rank has a host of its own and so waits for its
# transfers by sleeping (comm/mpi_wait.h; CommWait checks that it chose to).
t0=$(date +%s)
timeout 300 mpirun $OPTS --hostfile "$HOSTFILE" -np "$N" -x DS_COMM_TIMEOUT_S=60 "$BUILD/tests/comm/comm_tests" \
  --gtest_filter='Collectives.*:CommWait.*' > "$WORK/collectives.log" 2>&1 || {
  tail -40 "$WORK/collectives.log"; fail "collectives across $N hosts"; }
echo "ok 1b: every collective across $N hosts, waiting by sleeping ($(elapsed $t0) s)"

# 2. ds-run across the hosts vs N ranks on one host: the same losses.
cat > "$WORK/zero2.json" <<JSON
{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "steps_per_print": 1, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
 "zero_optimization": {"stage": 2, "reduce_bucket_size": 20000},
 "checkpoint": {"writer": {"type": "sync"}}}
JSON
train() {  # train LOG [ds-train args...] across the hosts
  local log=$1; shift
  timeout 300 "$BUILD/tools/ds-run" --hostfile "$HOSTFILE" --launcher_args "$OPTS" \
    "$BUILD/tools/ds-train" --config "$WORK/zero2.json" --model tiny --seq 64 --progress off "$@" > "$log" 2>&1
}
t0=$(date +%s)
train "$WORK/hosts.log" --steps 6 --save "$WORK/ckpt" || { tail -30 "$WORK/hosts.log"; fail "ds-train across hosts"; }
timeout 300 "$BUILD/tools/ds-run" --num_procs "$N" "$BUILD/tools/ds-train" --config "$WORK/zero2.json" --model tiny --seq 64 \
  --progress off --steps 6 > "$WORK/local.log" 2>&1 || { tail -30 "$WORK/local.log"; fail "ds-train on one host"; }
[ "$(losses "$WORK/hosts.log" | wc -l)" -ge 5 ] || fail "no per-step losses printed"
diff <(losses "$WORK/hosts.log") <(losses "$WORK/local.log") > /dev/null || {
  paste <(losses "$WORK/hosts.log") <(losses "$WORK/local.log"); fail "losses across hosts differ from one host"; }
timeout 120 "$BUILD/tools/ds-train" --config "$WORK/zero2.json" --model tiny --seq 64 --progress off --load "$WORK/ckpt" \
  --steps 8 > "$WORK/load.log" 2>&1 || { tail -20 "$WORK/load.log"; fail "the checkpoint saved across hosts does not load in one process"; }
echo "ok 2: ds-run across $N hosts: losses equal to one host's; its checkpoint loads in one process ($(elapsed $t0) s)"

# 3. A lossy link changes nothing; a slow one slows only. The loss comes from the kernel's netem qdisc
# where it has one, else from an nftables rule dropping a random 1% of the packets crossing worker-1's
# veth in each direction (netdev ingress and egress hooks, `numgen random`): TCP resends them.
t0=$(date +%s)
lossy=""
if tc qdisc add dev dsv1 root netem loss 1% 2>/dev/null; then
  lossy="netem"
elif command -v nft > /dev/null &&
  nft -f - 2>/dev/null <<'NFT'
table netdev ds_loss {
  chain in { type filter hook ingress device "dsv1" priority 0; numgen random mod 100 < 1 counter drop; }
  chain out { type filter hook egress device "dsv1" priority 0; numgen random mod 100 < 1 counter drop; }
}
NFT
then
  lossy="nftables"
fi
if [ -n "$lossy" ]; then
  train "$WORK/lossy.log" --steps 6 || { tail -30 "$WORK/lossy.log"; fail "training with 1% packet loss ($lossy)"; }
  diff <(losses "$WORK/lossy.log") <(losses "$WORK/local.log") > /dev/null || fail "1% packet loss changed the losses"
  dropped=""
  if [ "$lossy" = netem ]; then
    tc qdisc del dev dsv1 root
  else
    dropped=$(nft list table netdev ds_loss | grep -o 'packets [0-9]*' | awk '{s += $2} END {print s}')
    nft delete table netdev ds_loss
    [ "${dropped:-0}" -gt 0 ] || fail "the nftables rule dropped no packet"
    dropped=", $dropped packets dropped"
  fi
  echo "ok 3a: 1% packet loss on worker-1's link ($lossy$dropped): the same losses"
else
  echo "skip 3a: packet loss needs the kernel's netem qdisc or nftables (nft and the kernel's numgen expression)"
fi
# A token bucket: 100 Mbit/s on worker-1's link (tbf is in every kernel build we have met).
tc qdisc add dev dsv1 root tbf rate 100mbit burst 64kb latency 200ms || fail "tc tbf"
train "$WORK/slow.log" --steps 6 || { tail -30 "$WORK/slow.log"; fail "training over a slow link"; }
diff <(losses "$WORK/slow.log") <(losses "$WORK/local.log") > /dev/null || fail "a slow link changed the losses"
tc qdisc del dev dsv1 root
echo "ok 3b: worker-1's link at 100 Mbit/s: the same losses ($(elapsed $t0) s)"

# A long run in the background; waits until it has printed `steps` losses.
start_long() {  # LOG TIMEOUT_S [args]
  local log=$1 limit=$2; shift 2
  DS_COMM_TIMEOUT_S=$limit timeout 300 "$BUILD/tools/ds-run" --hostfile "$HOSTFILE" --launcher_args "$OPTS -x DS_COMM_TIMEOUT_S" \
    "$BUILD/tools/ds-train" --config "$WORK/zero2.json" --model tiny --seq 64 --progress off --steps 100000 "$@" > "$log" 2>&1 &
  LONG_PID=$!
  for _ in $(seq 600); do
    [ "$(losses "$log" | wc -l)" -ge 3 ] && return 0
    kill -0 "$LONG_PID" 2>/dev/null || { tail -20 "$log"; fail "the long run ended early"; }
    sleep 0.1
  done
  fail "the long run printed no losses in 60 s"
}
wait_exit() {  # BOUND_S: the long run must end within it, non-zero; prints its seconds
  local bound=$1 t=$(date +%s)
  while kill -0 "$LONG_PID" 2>/dev/null; do
    (( $(date +%s) - t > bound )) && { kill -9 "$LONG_PID"; fail "still running ${bound} s after the fault"; }
    sleep 0.2
  done
  wait "$LONG_PID"; local rc=$?
  [ "$rc" -ne 0 ] || fail "the job exited 0 after a fault"
  echo $(( $(date +%s) - t ))
}

# 4. A link cut mid-run: ds-run's TCP keepalive on mpirun's daemon links notices the silent host
# (~15 s, before the 20 s collective watchdog) and the job ends naming it.
start_long "$WORK/cut.log" 20
ip link set dsv1 down
secs=$(wait_exit 60) || { tail -30 "$WORK/cut.log"; exit 1; }
ip link set dsv1 up
grep -qE "lost communication with a remote daemon|comm watchdog: collective" "$WORK/cut.log" && grep -q "worker-1" "$WORK/cut.log" ||
  { tail -30 "$WORK/cut.log"; fail "the job's end after the link cut does not name worker-1"; }
echo "ok 4: link cut mid-run: the job exited in $secs s naming the lost host worker-1"

# 5. A host killed mid-run (after a checkpoint): the job ends; `latest` still loads.
start_long "$WORK/kill.log" 8 --save "$WORK/ckpt_kill" --save-interval 2
for _ in $(seq 300); do [ -f "$WORK/ckpt_kill/latest" ] && break; sleep 0.1; done
[ -f "$WORK/ckpt_kill/latest" ] || fail "no checkpoint before the kill"
ip netns pids worker-1 | xargs -r kill -9
secs=$(wait_exit 60) || { tail -30 "$WORK/kill.log"; exit 1; }
saved=$(sed 's/[^0-9]//g' "$WORK/ckpt_kill/latest")
timeout 120 "$BUILD/tools/ds-train" --config "$WORK/zero2.json" --model tiny --seq 64 --progress off --load "$WORK/ckpt_kill" \
  --steps $((saved + 1)) > "$WORK/kill_load.log" 2>&1 || { tail -20 "$WORK/kill_load.log"; fail "latest does not load after the kill"; }
echo "ok 5: host killed mid-run: the job exited in $secs s; latest ($(cat "$WORK/ckpt_kill/latest")) loads"
# 6. Preemption: a SIGTERM to ds-run reaches every rank on every host (through the rank wrappers), each
# saves at the next step boundary, and the job exits 0.
start_long "$WORK/preempt.log" 60 --save "$WORK/ckpt_preempt"
t0=$(date +%s)
kill -TERM "$(pgrep -P "$LONG_PID" -f tools/ds-run | head -1)"
while kill -0 "$LONG_PID" 2>/dev/null; do
  (( $(date +%s) - t0 > 60 )) && { kill -9 "$LONG_PID"; tail -20 "$WORK/preempt.log"; fail "still running 60 s after SIGTERM"; }
  sleep 0.2
done
wait "$LONG_PID" || { tail -30 "$WORK/preempt.log"; fail "the job did not exit 0 after SIGTERM"; }
[ -f "$WORK/ckpt_preempt/latest" ] || fail "no checkpoint after SIGTERM"
got=$(grep -c "SIGTERM received" "$WORK/preempt.log")
[ "$got" -eq "$N" ] || { tail -30 "$WORK/preempt.log"; fail "$got of $N ranks saw the SIGTERM"; }
echo "ok 6: SIGTERM to ds-run: all $N ranks stopped at a step boundary, saved $(cat "$WORK/ckpt_preempt/latest"), exit 0 in $(elapsed $t0) s"
# 7. A host that cannot finish its part of a preemption save (rank 1 stops after writing its shard):
# the others give up at the collective watchdog's bound and exit non-zero; `latest` is untouched and loads.
before=$(cat "$WORK/ckpt_preempt/latest")
DS_CKPT_STALL_AT=rank_file@1 start_long "$WORK/stall.log" 8 --save "$WORK/ckpt_preempt" --resume
t0=$(date +%s)
kill -TERM "$(pgrep -P "$LONG_PID" -f tools/ds-run | head -1)"
secs=$(wait_exit 60) || { tail -30 "$WORK/stall.log"; exit 1; }
[ "$(cat "$WORK/ckpt_preempt/latest")" = "$before" ] || fail "latest moved to $(cat "$WORK/ckpt_preempt/latest") though rank 1 never finished its part"
grep -q "comm watchdog" "$WORK/stall.log" || { tail -30 "$WORK/stall.log"; fail "the others did not stop at the watchdog"; }
timeout 120 "$BUILD/tools/ds-train" --config "$WORK/zero2.json" --model tiny --seq 64 --progress off --load "$WORK/ckpt_preempt" \
  --steps "$(( ${before//[^0-9]/} + 1 ))" > "$WORK/stall_load.log" 2>&1 ||
  { tail -20 "$WORK/stall_load.log"; fail "latest ($before) does not load after the stalled save"; }
echo "ok 7: a host stalled in a preemption save: the job exited non-zero in $secs s, latest still $before and loads"
echo "PASS: multihost on $N test hosts"
