#!/usr/bin/env bash
# Elastic training on N test hosts (scripts/testhosts.sh). Usage: elastic_test.sh BUILD_DIR N (N >= 2).
# ds-run --elastic_training starts ds-train on all N hosts with the batch the config's elasticity
# section gives; the last host's link is cut mid-run, the job fails and restarts from `latest` on the
# N-1 hosts still reachable (the largest valid world size there); the link comes back, the job stops
# at a step boundary (every rank saves) and restarts on N again; it finishes with exit 0. The global
# batch's loss at every progress line of every attempt, replays included, equals one process's on
# the same global batch (printed to 4 decimals; only the summation order differs). Exit 77 where test
# hosts are not allowed.
set -uo pipefail
BUILD=$(readlink -f "${1:?build dir}")
N=${2:-4}
source "$(dirname "$(readlink -f "$0")")/common.sh"
LAST=$((N - 1))
STEPS=${DS_ELASTIC_TEST_STEPS:-200}

# Batch 12 = micro x GAS x world for every world 1..4 (valid sizes [1, 2, 3, 4]).
cat > "$WORK/elastic.json" <<JSON
{"elasticity": {"enabled": true, "max_train_batch_size": 12, "micro_batch_sizes": [1, 2, 3], "min_gpus": 1,
                "max_gpus": 4, "version": 0.1},
 "steps_per_print": 1, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
 "zero_optimization": {"stage": 2, "reduce_bucket_size": 20000}}
JSON
# ds-train's progress lines ("step 15/300 loss=4.1234 ..."), every STEPS/20 steps: the loss over the
# whole global batch, the same number at any world size.
TRAIN=("$BUILD/tools/ds-train" --config "$WORK/elastic.json" --model tiny --seq 64 --progress lines --steps "$STEPS")
step_losses() { sed -n 's|^step \([0-9]*\)/[0-9]* loss=\([0-9.]*\) .*|\1 \2|p' "$1"; }
count() { step_losses "$1" | wc -l; }
wait_for() {  # LOG PATTERN BOUND_S: until the log has the pattern
  local t=$(date +%s)
  until grep -q "$2" "$1"; do
    kill -0 "$JOB" 2>/dev/null || { tail -30 "$1"; fail "the elastic job ended while waiting for '$2'"; }
    (( $(date +%s) - t > $3 )) && { tail -30 "$1"; fail "no '$2' within $3 s"; }
    sleep 0.2
  done
}
wait_steps() {  # LOG K BOUND_S: until K more losses are logged
  local want=$(( $(count "$1") + $2 )) t=$(date +%s)
  until (( $(count "$1") >= want )); do
    kill -0 "$JOB" 2>/dev/null || { tail -30 "$1"; fail "the elastic job ended early"; }
    (( $(date +%s) - t > $3 )) && { tail -30 "$1"; fail "no $2 steps within $3 s"; }
    sleep 0.2
  done
}

# The reference: one process, the same global batch (micro 3 x GAS 4).
t0=$(date +%s)
DEEPSPEED_ELASTICITY_CONFIG='{"max_train_batch_size": 12, "micro_batch_sizes": [1, 2, 3], "version": 0.1}' \
  timeout 300 "${TRAIN[@]}" > "$WORK/one.log" 2>&1 || { tail -20 "$WORK/one.log"; fail "one-process reference run"; }
[ "$(count "$WORK/one.log")" -ge 20 ] || fail "the reference logged $(count "$WORK/one.log") progress lines"
echo "ok 0: one-process reference, $STEPS steps of batch 12 ($(elapsed $t0) s)"

t0=$(date +%s)
LOG="$WORK/elastic.log"
DS_COMM_TIMEOUT_S=20 timeout 500 "$BUILD/tools/ds-run" --hostfile "$HOSTFILE" --launcher_args "$OPTS -x DS_COMM_TIMEOUT_S" \
  --elastic_training --max_restarts 2 --elastic_probe_interval 1 \
  "${TRAIN[@]}" --save "$WORK/ckpt" --save-interval 5 --resume > "$LOG" 2>&1 &
JOB=$!
wait_for "$LOG" "elastic: starting $N rank(s)" 30
wait_steps "$LOG" 2 120  # step 1 and step 10: checkpoints at 5 and 10
ip link set "dsv$LAST" down
wait_for "$LOG" "elastic: restarting with $LAST rank(s)" 90
echo "ok 1: worker-$LAST's link cut: the job failed and restarted on $LAST host(s) ($(elapsed $t0) s)"
t1=$(date +%s)
wait_steps "$LOG" 1 120
ip link set "dsv$LAST" up
wait_for "$LOG" "elastic: restarting with $N rank(s)" 90
echo "ok 2: worker-$LAST back: the job stopped at a step boundary and restarted on $N hosts ($(elapsed $t1) s)"
wait "$JOB" || { tail -30 "$LOG"; fail "the elastic job did not exit 0"; }
grep -q "stopped by SIGTERM" "$LOG" || { tail -30 "$LOG"; fail "the grow did not go through a saved stop"; }
[ "$(grep -c "resumed from" "$LOG")" -ge 2 ] || fail "the restarts did not resume from latest"

# Every logged step, replays included, against the reference.
step_losses "$WORK/one.log" > "$WORK/one.txt"
step_losses "$LOG" > "$WORK/elastic.txt"
awk -v tol=1.5e-4 -v last="$STEPS" 'NR == FNR { ref[$1] = $2; next }
  $1 in ref { d = $2 - ref[$1]; if (d < 0) d = -d; if (d > tol) { print "step " $1 ": " $2 " vs " ref[$1]; bad = 1 }; n++ }
  END { if (n < 20) { print "only " n " progress lines to compare"; bad = 1 } exit bad }' \
  "$WORK/one.txt" "$WORK/elastic.txt" || fail "the elastic run's losses differ from one process's"
grep -q "^step $STEPS/$STEPS " "$LOG" || fail "the elastic run did not reach step $STEPS"
echo "ok 3: $(wc -l < "$WORK/elastic.txt") progress losses (replays included) equal the one-process run's (4 decimals); exit 0 ($(elapsed $t0) s in all)"
grep "ds-run: elastic:" "$LOG"
echo "PASS: elastic training on $N test hosts"
