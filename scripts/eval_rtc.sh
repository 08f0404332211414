#!/usr/bin/env bash
# Real-time chunking against latency compensation alone, and against lockstep (issue 47).
# Reporting seed 0, fixed before any run; nothing is tuned (rtc_beta is lerobot's 10).
# Usage: bash scripts/eval_rtc.sh [OUT] [LIBERO_EPISODES] [YAM_EPISODES]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/rtc_eval}
N_LIBERO=${2:-50}
N_YAM=${3:-20}
VS=${VS:-.venv/bin/vam-stack}
mkdir -p "$OUT"
run() {  # name, then vam-stack sim arguments
  local name=$1; shift
  if [ -f "$OUT/$name/summary.json" ]; then echo "== $name: done already"; return; fi
  echo "== $name: $*"
  $VS sim --executor lockstep "$@" --seed 0 --no-record --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  grep -E "^success|^replans|^realtime" "$OUT/$name.log" || true
}
for g in none tr_adaptive; do
  for rtc in guided off; do
    run "libero_realtime_${g}_rtc_$rtc" --robot libero-mock --preset libero64 --suite goal --episodes "$N_LIBERO" \
      --guidance $g --executor realtime --rtc $rtc
  done
done
for g in none tr_adaptive; do
  run "libero_lockstep_$g" --robot libero-mock --preset libero64 --suite goal --episodes "$N_LIBERO" --guidance $g
done
for rtc in off guided; do
  run "yam_realtime_none_rtc_$rtc" --robot yam-mujoco --task handover --episodes "$N_YAM" --guidance none \
    --executor realtime --rtc $rtc
done
run yam_lockstep_none --robot yam-mujoco --task handover --episodes "$N_YAM" --guidance none
