#!/usr/bin/env bash
# ds-autotune end to end at world 2 (docs/autotuning.md): GPT-2 tiny under ds-train, stages 1 and 3,
# micro-batches up to 4. Checks the model profile the engine wrote, that every timed experiment
# produced DeepSpeed's metric file and ended itself (the program was asked for 50 steps), that the
# optimum is the best experiment of summary.txt and loads as a config, and `ds-run --autotuning`.
# Usage: autotune_e2e.sh DS_AUTOTUNE DS_TRAIN WORK_DIR
set -euo pipefail
AUTOTUNE=$1 TRAIN=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
for i in $(seq 200); do printf 'nothing is certain but death and taxes %d. ' "$i"; done > text.txt
cat > tune.json <<'JSON'
{
  // DeepSpeed's autotuning section with a tuning list for the stage and "auto" micro-batch.
  "train_micro_batch_size_per_gpu": "auto",
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
  "zero_optimization": {"stage": [1, 3]},
  "autotuning": {"enabled": true, "start_profile_step": 1, "end_profile_step": 3,
                 "max_train_micro_batch_size_per_gpu": 4, "num_tuning_micro_batch_sizes": 2},
}
JSON
run=(--num_procs 2 "$TRAIN" --model tiny --seq 32 --data text.txt --steps 50 --progress off --config tune.json)
"$AUTOTUNE" --exp_timeout 120 -- "${run[@]}" > tune.log 2>&1 || { cat tune.log; exit 1; }
cat tune.log
python3 - <<'PY'
import json, os, re
R = "autotuning_results"
info = json.load(open(f"{R}/profile_model_info/model_info.json"))
assert info["world_size"] == 2 and info["data_parallel_size"] == 2, info
assert info["num_params"] == sum(info["param_numels"]) > 0, info
assert info["activation_mem_per_gpu"] > 0 and info["has_layer_list"], info
ckpt = json.load(open(f"{R}/profile_model_info_ckpt/model_info.json"))
assert 0 < ckpt["activation_mem_per_gpu"] < info["activation_mem_per_gpu"], (ckpt, info)
summary = open(f"{R}/summary.txt").read()
assert "| tuning_space" in summary and "| global" in summary, summary
rows = re.findall(r"^\| (z\d\S*) +\| +(\d) \| +(\d+) \| +(\d+) \|.*\| +([\d.e+]+) \| +[\d.]+ \| (\w+)", summary, re.M)
timed = [r for r in rows if r[5] in ("ok", "best")]
assert {r[1] for r in timed} == {"1", "3"}, rows
for name, stage, micro, gas, metric, _ in timed:
    m = json.load(open(f"{R}/{name}/metrics.json"))
    assert m["train_batch_size"] == int(micro) * int(gas) * 2, (name, m)
    assert len(m["step_seconds"]) == 2, m  # steps 2 and 3: after start_profile_step 1
    assert abs(m["throughput"] - float(metric)) <= 1e-4 * m["throughput"], (name, m, metric)
    assert "this experiment ends here" in open(f"{R}/{name}/stdout.log").read() + open(f"{R}/{name}/stderr.log").read()
best = max(timed, key=lambda r: float(r[4]))
assert best[5] == "best", (best, rows)
opt = json.load(open(f"{R}/ds_config_optimal.json"))
assert "autotuning" not in opt and opt["zero_optimization"]["stage"] == int(best[1]), opt
assert opt["train_micro_batch_size_per_gpu"] == int(best[2]), (opt, best)
assert os.path.basename(open(f"{R}/cmd_optimal.txt").read().split("--config ")[1].split()[0]) == "ds_config_optimal.json"
assert os.path.exists(f"autotuning_exps/{best[0]}.json")
print("autotune e2e: best", best[0], best[4], "samples/s of", len(timed), "timed experiments")
PY
# The optimal config trains at the world it was tuned for (no autotuning section left to end it early).
DS_RUN=$(dirname "$AUTOTUNE")/ds-run
"$DS_RUN" --num_procs 2 "$TRAIN" --model tiny --seq 32 --data text.txt --steps 2 --progress off --config autotuning_results/ds_config_optimal.json
# DeepSpeed's spelling reaches the same tool; an experiment whose program stops too early is named.
sed -i 's/"stage": \[1, 3\]/"stage": 1/; s/"max_train_micro_batch_size_per_gpu": 4/"max_train_micro_batch_size_per_gpu": 1/' tune.json
short=(--num_procs 2 "$TRAIN" --model tiny --seq 32 --data text.txt --steps 2 --progress off --config tune.json)
if "$DS_RUN" --autotuning tune "${short[@]}" > short.log 2>&1; then cat short.log; echo "expected a failure"; exit 1; fi
grep -q "the program ended before global step 3 without a result: give it more steps" short.log || { cat short.log; exit 1; }
grep -q "ds-autotune: error: no experiment produced a result" short.log || { cat short.log; exit 1; }
echo "autotune e2e: passed"
