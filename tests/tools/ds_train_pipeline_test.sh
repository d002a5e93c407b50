#!/usr/bin/env bash
# ds-train --pipeline-stages 2 at world 2 (each rank builds only its stage's layers) against ds-train
# in one process on the same global batch: every printed loss within 1e-5 (relative). Usage:
# ds_train_pipeline_test.sh BUILD_DIR
set -euo pipefail
BUILD=$(readlink -f "${1:?build dir}")
WORK=$(mktemp -d /tmp/ds_train_pipe.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/config.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "steps_per_print": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 0}}
JSON
run() {  # LOG [launcher args...] -- [ds-train args...]
  local log=$1; shift
  timeout 240 "$@" --config "$WORK/config.json" --model tiny --seq 32 --steps 5 --progress off > "$log" 2>&1 ||
    { tail -20 "$log"; echo "FAIL: $*" >&2; exit 1; }
}
run "$WORK/pipe.log" "$BUILD/tools/ds-run" --num_procs 2 "$BUILD/tools/ds-train" --pipeline-stages 2
run "$WORK/one.log" "$BUILD/tools/ds-train"
losses() { grep -o 'loss=[0-9.]*, loss_scale' "$1" | sed 's/loss=//; s/, loss_scale//'; }
[ "$(losses "$WORK/pipe.log" | wc -l)" -ge 4 ] || { tail -20 "$WORK/pipe.log"; echo "FAIL: no losses printed" >&2; exit 1; }
paste <(losses "$WORK/pipe.log") <(losses "$WORK/one.log") | awk '
  { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $2) { print "FAIL: step " NR ": pipeline " $1 " vs one process " $2; bad = 1 } }
  END { if (NR == 0) { print "FAIL: nothing to compare"; exit 1 } exit bad }'
echo "PASS: ds-train --pipeline-stages 2 at world 2: $(losses "$WORK/pipe.log" | wc -l) losses within 1e-5 of one process"
