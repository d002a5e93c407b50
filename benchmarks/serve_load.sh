#!/usr/bin/env bash
# benchmarks/serve_load.sh: a bounded load test of ds-serve (docs/serve.md). A random GPT-2 folder
# (serve_bench --write-model), the real ds-serve on 127.0.0.1, then two rounds of CLIENTS concurrent
# clients x REQUESTS requests (benchmarks/serve_load.mjs: streamed and whole, n = 2, logprobs, stop
# strings, penalties, chat; every 4th stream dropped after its first chunk). After each round the
# server must be idle again (no KV block in use, nothing in flight) and its RSS is read from /proc.
# "Flat" = RSS after round 2 at most 10% above RSS after round 1. Every request must be answered
# or refused (429/503 in OpenAI's error JSON); none may fail. Ends with two BENCH lines:
#   BENCH serve_load_rss ours=<MiB after round 2> ref=<MiB after round 1> unit=MiB ratio=...  (lower is better, ≤ 1.10)
#   BENCH serve_load_answered ours=<answered + dropped + refused> ref=<requests sent> unit=requests ratio=... (= 1)
#
#   bash benchmarks/serve_load.sh                 CLIENTS=64 REQUESTS=500 (per round)
#   CLIENTS=16 REQUESTS=100 BUILD=build-debug bash benchmarks/serve_load.sh
set -euo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$HERE/build}
CLIENTS=${CLIENTS:-64}
REQUESTS=${REQUESTS:-500}
for b in "$BUILD/tools/ds-serve" "$BUILD/benchmarks/serve_bench"; do
  [[ -x "$b" ]] || { echo "serve_load.sh: $b is missing (ninja -C $BUILD ds-serve serve_bench)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "serve_load.sh: node is needed for the clients" >&2; exit 1; }

WORK=$(mktemp -d /tmp/ds_serve_load.XXXXXX)
PID=
cleanup() {
  if [[ -n "$PID" ]] && kill -0 "$PID" 2>/dev/null; then kill -KILL "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/model"
"$BUILD/benchmarks/serve_bench" --write-model "$WORK/model" --embd 64 --layers 2 --positions 256 >/dev/null
"$BUILD/tools/ds-serve" --model-dir "$WORK/model" --port 0 --max-concurrent "$CLIENTS" >"$WORK/server.log" 2>&1 &
PID=$!
PORT=
for _ in $(seq 1 300); do
  PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/server.log")
  [[ -n "$PORT" ]] && break
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$PORT" ]] || { echo "serve_load.sh: ds-serve did not start" >&2; cat "$WORK/server.log" >&2; exit 1; }
URL="http://127.0.0.1:$PORT"
echo "serve_load.sh: ds-serve pid $PID at $URL; $CLIENTS clients x $REQUESTS requests, two rounds"

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1==m {print $2}'; }
# Waits until the server is idle (what a leak would keep: KV blocks, requests in flight).
settle() {
  for _ in $(seq 1 100); do
    [[ "$(metric ds_serve_kv_blocks_in_use)" == 0 && "$(metric ds_serve_requests_in_flight)" == 0 ]] && return 0
    sleep 0.1
  done
  echo "serve_load.sh: not idle after the round: $(metric ds_serve_kv_blocks_in_use) KV blocks in use, $(metric ds_serve_requests_in_flight) in flight" >&2
  return 1
}

echo "RSS at start: $(( $(rss_kib) / 1024 )) MiB"
declare -a RSS
TOTAL_OK=0
TOTAL_FAILED=0
for round in 1 2; do
  peak=0
  ( while kill -0 "$PID" 2>/dev/null; do rss_kib; sleep 0.5; done ) >"$WORK/rss$round.txt" 2>/dev/null &
  SAMPLER=$!
  node "$HERE/benchmarks/serve_load.mjs" "$URL" "$CLIENTS" "$REQUESTS" "$round" >"$WORK/round$round.json"
  kill "$SAMPLER" 2>/dev/null || true
  wait "$SAMPLER" 2>/dev/null || true
  settle
  sleep 1
  RSS[$round]=$(rss_kib)
  peak=$(sort -n "$WORK/rss$round.txt" | tail -1)
  read -r answered dropped refused failed secs errors < <(python3 -c "
import json,sys; j=json.load(open('$WORK/round$round.json'))
print(j['answered'], j['dropped'], j['refused'], j['failed'], j['seconds'], json.dumps(j['errors']))")
  echo "round $round: $answered answered, $dropped dropped mid-stream, $refused refused, $failed failed in ${secs} s;" \
       "RSS after $(( RSS[round] / 1024 )) MiB (peak $(( ${peak:-0} / 1024 )) MiB)"
  [[ "$failed" == 0 ]] || echo "  failures: $errors"
  TOTAL_OK=$(( TOTAL_OK + answered + dropped + refused ))
  TOTAL_FAILED=$(( TOTAL_FAILED + failed ))
done
echo "server: kv blocks $(metric ds_serve_kv_blocks_total), generated tokens $(metric ds_serve_generated_tokens_total)"
kill -TERM "$PID"
wait "$PID" && STATUS=0 || STATUS=$?
PID=
echo "ds-serve exited with $STATUS after SIGTERM"

python3 -c "
r1, r2 = ${RSS[1]} / 1024, ${RSS[2]} / 1024
print('BENCH serve_load_rss ours=%.1f ref=%.1f unit=MiB ratio=%.3f' % (r2, r1, r2 / r1))
print('BENCH serve_load_answered ours=%d ref=%d unit=requests ratio=%.3f' % ($TOTAL_OK, 2 * $REQUESTS, $TOTAL_OK / (2 * $REQUESTS)))"
flat=$(python3 -c "print(int(${RSS[2]} <= 1.10 * ${RSS[1]}))")
[[ "$flat" == 1 && "$TOTAL_FAILED" == 0 && "$STATUS" == 0 ]]
