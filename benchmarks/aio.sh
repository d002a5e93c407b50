#!/usr/bin/env bash
# benchmarks/aio.sh: our async I/O engine (tools/ds-io-bench, io_uring) against fio (libaio, the
# engine DeepSpeed's aio op uses) on the same file: O_DIRECT, 1 MiB blocks, queue depth 32, one
# thread, whole-file sequential read and write. The disk is noisy, so the runs are interleaved
# (ours, fio, ours, fio, ...) and medians compared. Ends with one BENCH line per direction.
#
#   benchmarks/aio.sh [DIR] [SIZE] [REPS]      defaults: /work 2G 5
#   DS_IO_BENCH=build/tools/ds-io-bench benchmarks/aio.sh /mnt/nvme 8G 7
set -euo pipefail

DIR=${1:-/work}
SIZE=${2:-2G}
REPS=${3:-5}
BS=1M
QD=32
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${DS_IO_BENCH:-}
if [[ -z "$BENCH" ]]; then
  for b in "$HERE"/build/tools/ds-io-bench "$HERE"/build-*/tools/ds-io-bench; do
    [[ -x "$b" ]] && BENCH=$b && break
  done
fi
[[ -x "$BENCH" ]] || { echo "aio.sh: build ds-io-bench first (cmake --build build --target ds-io-bench) or set DS_IO_BENCH" >&2; exit 1; }
if ! command -v fio >/dev/null; then
  echo "aio.sh: installing fio (the reference)" >&2
  apt-get install -y fio >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y fio >/dev/null 2>&1; }
fi
command -v fio >/dev/null || { echo "aio.sh: fio is missing (apt-get install fio)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "aio.sh: python3 is needed to read fio's JSON" >&2; exit 1; }

FILE="$DIR/ds_aio_bench.$$.dat"
trap 'rm -f "$FILE"' EXIT
echo "aio.sh: $FILE, $SIZE, block $BS, queue depth $QD, $REPS interleaved repetitions"
df -h "$DIR" | tail -1

fio_gbps() {  # fio_gbps read|write → GB/s (1e9 bytes)
  fio --name=ref --filename="$FILE" --rw="$1" --bs=$BS --iodepth=$QD --ioengine=libaio --direct=1 \
      --size="$SIZE" --numjobs=1 --thread --output-format=json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print('%.4f' % (j['$1']['bw_bytes']/1e9))"
}
ours_gbps() {  # ours_gbps read|write → GB/s
  "$BENCH" --path "$FILE" --size "$SIZE" --block-size $BS --queue-depth $QD --threads 1 --io-size 256M \
           --reps 1 --"$1"-only --keep --overwrite | awk -v op="$1" '$1=="RESULT" && $2==op {print $3}'
}

# Lay out the file once (untimed) so every timed write is an overwrite, for both tools.
fio --name=layout --filename="$FILE" --rw=write --bs=$BS --iodepth=$QD --ioengine=libaio --direct=1 \
    --size="$SIZE" --output-format=terse >/dev/null 2>&1

declare -a OR OW FR FW
for ((i = 0; i < REPS; i++)); do
  OW+=("$(ours_gbps write)"); FW+=("$(fio_gbps write)")
  OR+=("$(ours_gbps read)");  FR+=("$(fio_gbps read)")
  printf 'rep %d: read ours %s fio %s | write ours %s fio %s GB/s\n' $((i + 1)) "${OR[i]}" "${FR[i]}" "${OW[i]}" "${FW[i]}"
done

python3 - "${OR[*]}" "${FR[*]}" "${OW[*]}" "${FW[*]}" <<'PY'
import statistics, sys
o_r, f_r, o_w, f_w = ([float(x) for x in a.split()] for a in sys.argv[1:5])
print()
print(f"{'op':<6} {'ours median':>12} {'fio median':>11} {'ratio':>7}   (GB/s; ours: io_uring, fio: libaio)")
rows = []
for name, o, f in (("read", o_r, f_r), ("write", o_w, f_w)):
    mo, mf = statistics.median(o), statistics.median(f)
    print(f"{name:<6} {mo:>12.3f} {mf:>11.3f} {mo / mf:>7.3f}")
    rows.append((name, mo, mf))
for name, mo, mf in rows:
    print(f"BENCH aio_{name} ours={mo:.3f} ref={mf:.3f} unit=GB_per_s ratio={mo / mf:.3f}")
PY
