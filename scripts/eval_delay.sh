#!/usr/bin/env bash
# Delayed lockstep (issue 47): how much of the realtime executor's loss on mocked LIBERO a deterministic
# d-tick replan latency explains, with and without real-time chunking. Plan in docs/realtime_chunking.md
# (written before running): libero64 goal, seed 0, 50 episodes, none; d in {0, 3, 5}; rtc off / guided.
#   bash scripts/eval_delay.sh [OUT (default runs/delay_eval)] [EPISODES (default 50)]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/delay_eval}
N=${2:-50}
VS=${VS:-.venv/bin/vam-stack}
mkdir -p "$OUT"
run() {  # name, then sim arguments
  local name=$1; shift
  if [ -f "$OUT/$name/summary.json" ]; then echo "== $name: done already"; return; fi
  echo "== $name $(date -u +%T)"
  $VS sim --executor lockstep --robot libero-mock --preset libero64 --suite goal --episodes "$N" --seed 0 --guidance none \
    --backend torch --no-record "$@" --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  grep -E "^success" "$OUT/$name.log" || true
}
run d0
for d in 3 5; do
  run "d${d}_rtc_off" --lockstep-delay "$d" --rtc off
  run "d${d}_rtc_guided" --lockstep-delay "$d" --rtc guided
done
