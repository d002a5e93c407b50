#!/usr/bin/env bash
# benchmarks/infinity.sh: ZeRO-Infinity on a model whose model states (16 bytes per parameter:
# bf16 parameters and gradients, fp32 master and Adam moments) are at least 1.5x this machine's RAM.
# Stage 3, bf16, offload_param nvme, offload_optimizer nvme, activation checkpointing, 3 steps of
# ds-train. Prints the step time split by phase, bytes moved and GB/s, the peak RSS against RAM,
# and ends with
#   BENCH infinity_step ours=<s/step> ref=<lower bound> unit=s_per_step ratio=<ours/ref>
# where the lower bound is max(compute, bytes read / fio read GB/s + bytes written / fio write GB/s)
# (lower is better; fio measured on the same folder in the same run, O_DIRECT, 1 MiB, queue depth 32).
# Not part of CI: it writes about 2.3x RAM to the disk and takes several minutes.
#
#   benchmarks/infinity.sh [NVME_DIR] [STEPS]        defaults: /work/ds_infinity 3
#   DS_INFINITY_EMBD=2560 DS_INFINITY_HEADS=20 DS_INFINITY_SEQ=128 DS_INFINITY_LAYERS=<auto>
set -euo pipefail

DIR=${1:-/work/ds_infinity}
STEPS=${2:-3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
TRAIN=${DS_TRAIN:-$HERE/build/tools/ds-train}
[[ -x "$TRAIN" ]] || { echo "infinity.sh: build ds-train first (cmake --build build --target ds-train) or set DS_TRAIN" >&2; exit 1; }
command -v fio >/dev/null || { echo "infinity.sh: fio is missing (apt-get install fio)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "infinity.sh: python3 is needed to read the logs" >&2; exit 1; }
mkdir -p "$DIR"

EMBD=${DS_INFINITY_EMBD:-2560}
HEADS=${DS_INFINITY_HEADS:-20}
SEQ=${DS_INFINITY_SEQ:-128}
VOCAB=50257
POS=1024
RAM=$(awk '/MemTotal/ {printf "%.0f", $2 * 1024}' /proc/meminfo)
# GPT-2 parameters: V·C + P·C + L·(12·C² + 13·C) + 2·C; the fewest layers with 16 B/param >= 1.5 x RAM.
LAYERS=${DS_INFINITY_LAYERS:-$(python3 -c "
import math; C, V, P, ram = $EMBD, $VOCAB, $POS, $RAM
print(math.ceil((1.5 * ram / 16 - V * C - P * C - 2 * C) / (12 * C * C + 13 * C)))")}
PARAMS=$(python3 -c "C, V, P, L = $EMBD, $VOCAB, $POS, $LAYERS; print(V*C + P*C + L*(12*C*C + 13*C) + 2*C)")
echo "infinity.sh: GPT-2 with $LAYERS layers, n_embd $EMBD: $PARAMS parameters, model states $(python3 -c "print(f'{$PARAMS*16/2**30:.1f}')") GiB = $(python3 -c "print(f'{$PARAMS*16/$RAM:.2f}')") x RAM ($(python3 -c "print(f'{$RAM/2**30:.1f}')") GiB)"
df -h "$DIR" | tail -1

# The reference: fio on the same folder, same block size and queue depth as aio.sh.
FILE="$DIR/fio.$$.dat"
fio_gbps() {
  fio --name=ref --filename="$FILE" --rw="$1" --bs=1M --iodepth=32 --ioengine=libaio --direct=1 \
      --size=2G --numjobs=1 --thread --output-format=json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print('%.4f' % (j['$1']['bw_bytes']/1e9))"
}
FIO_W=$(fio_gbps write)
FIO_R=$(fio_gbps read)
rm -f "$FILE"
echo "fio on $DIR: read $FIO_R GB/s, write $FIO_W GB/s"

CONFIG="$DIR/ds_config.json"
cat > "$CONFIG" <<EOF
{
  "train_micro_batch_size_per_gpu": 1,
  "gradient_accumulation_steps": 1,
  "steps_per_print": 1,
  "wall_clock_breakdown": true,
  "bf16": {"enabled": true},
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-4, "warmup_num_steps": 1000}},
  "zero_optimization": {
    "stage": 3,
    "offload_param": {"device": "nvme", "nvme_path": "$DIR", "buffer_count": 4, "buffer_size": 1.3e8},
    "offload_optimizer": {"device": "nvme", "nvme_path": "$DIR", "buffer_count": 9,
                          "pipeline_read": true, "pipeline_write": true},
    "sub_group_size": 2.5e7,
    "reduce_bucket_size": 5e7,
    "stage3_prefetch_bucket_size": 1e8,
    "stage3_max_live_parameters": 3e8
  },
  "activation_checkpointing": {"partition_activations": false, "number_checkpoints": $LAYERS},
  "aio": {"block_size": 1048576, "queue_depth": 32, "intra_op_parallelism": 1}
}
EOF

LOG="$DIR/train.log"
/usr/bin/time -v "$TRAIN" --config "$CONFIG" --model xl --layers "$LAYERS" --embd "$EMBD" --heads "$HEADS" \
  --vocab $VOCAB --seq "$SEQ" --steps "$STEPS" --progress lines 2>&1 | tee "$LOG"

python3 - "$LOG" "$FIO_R" "$FIO_W" "$RAM" "$PARAMS" <<'PY'
import re, sys
log, fio_r, fio_w, ram, params = open(sys.argv[1]).read(), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
unit = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
def size(s):
    v, u = s.split()
    return float(v) * unit[u]
B = r"([\d.]+ (?:bytes|KiB|MiB|GiB|TiB))"
fwd_bwd_step = re.findall(r"time \(ms\) \| fwd: ([\d.]+) \| bwd: ([\d.]+) \| bwd_inner: [\d.]+ \| bwd_allreduce: [\d.]+ \| step: ([\d.]+)", log)
par = re.findall(r"nvme parameter swap since the last report: read " + B + r" in (\d+) shard reads, waited ([\d.]+) s on them "
                 r"\(forward/backward\); wrote " + B + r" in (\d+) shard writes, waited ([\d.]+) s", log)
opt = re.findall(r"nvme optimizer swap since the last report: steps ([\d.]+) s = compute ([\d.]+) s \+ waiting on reads ([\d.]+) s "
                 r"\+ on writes ([\d.]+) s; read " + B + " and wrote " + B, log)
rss = re.findall(r"Maximum resident set size \(kbytes\): (\d+)", log)
n = min(len(fwd_bwd_step), len(par), len(opt))
if n == 0 or not rss:
    sys.exit("infinity.sh: the run did not finish (no per-step report in the log)")
print()
print(f"{'step':>4} {'total s':>8} {'fwd':>7} {'bwd':>7} {'optim':>7} | {'param rd':>9} {'wait':>6} {'param wr':>9} {'wait':>6} | "
      f"{'optim rd':>9} {'wait':>6} {'optim wr':>9} {'wait':>6} | {'compute':>7} {'GB/s':>5}")
rows = []
for i in range(n):
    f, b, s = (float(x) / 1e3 for x in fwd_bwd_step[i])
    pr, _, prw, pw, _, pww = par[i]
    _, _, orw, oww, orb, owb = opt[i]
    total = f + b + s
    rd, wr = size(pr) + size(orb), size(pw) + size(owb)
    waits = float(prw) + float(pww) + float(orw) + float(oww)
    compute = max(0.0, total - waits)
    rows.append((total, compute, rd, wr))
    print(f"{i + 1:>4} {total:>8.1f} {f:>7.1f} {b:>7.1f} {s:>7.1f} | {size(pr) / 2**30:>7.1f}Gi {float(prw):>6.1f} "
          f"{size(pw) / 2**30:>7.1f}Gi {float(pww):>6.1f} | {size(orb) / 2**30:>7.1f}Gi {float(orw):>6.1f} "
          f"{size(owb) / 2**30:>7.1f}Gi {float(oww):>6.1f} | {compute:>7.1f} {(rd + wr) / total / 1e9:>5.2f}")
# Steady state: the steps after the first (which also pays first-touch costs), or the only one.
use = rows[1:] if len(rows) > 1 else rows
ours = sum(r[0] for r in use) / len(use)
compute = sum(r[1] for r in use) / len(use)
io = sum(r[2] / (fio_r * 1e9) + r[3] / (fio_w * 1e9) for r in use) / len(use)
ref = max(compute, io)
peak = int(rss[-1]) * 1024
print()
print(f"model: {params / 1e9:.2f}B parameters, model states {params * 16 / 2**30:.1f} GiB = {params * 16 / ram:.2f} x RAM")
print(f"peak RSS {peak / 2**30:.2f} GiB = {100 * peak / ram:.1f}% of RAM (target < 60%)")
print(f"per step (mean of steps {2 if len(rows) > 1 else 1}-{len(rows)}): {ours:.1f} s; compute {compute:.1f} s; "
      f"disk at fio speed {io:.1f} s (read {fio_r:.2f} GB/s, write {fio_w:.2f} GB/s); lower bound {ref:.1f} s")
print(f"BENCH infinity_step ours={ours:.2f} ref={ref:.2f} unit=s_per_step ratio={ours / ref:.3f}")
print(f"BENCH infinity_peak_rss ours={peak / 2**30:.2f} ref={0.6 * ram / 2**30:.2f} unit=GiB ratio={peak / (0.6 * ram):.3f}")
PY
