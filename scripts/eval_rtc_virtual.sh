#!/usr/bin/env bash
# Realtime RTC on a virtual clock (issue 47; plan in docs/realtime_chunking.md, "Realtime on a virtual
# clock"): guided against off, every replan taking exactly LAT ms of virtual time, paired on the
# episodes. Deterministic: the machine's load does not change the outcome. Reporting seed 0.
#   bash scripts/eval_rtc_virtual.sh [OUT (default runs/rtc_virtual)] [EPISODES (default 50)] [LAT (default 138)]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/rtc_virtual}
N=${2:-50}
LAT=${3:-138}
VS=(.venv/bin/python -m vam_cli.main)
mkdir -p "$OUT"
for rtc in guided off; do
  name="libero_virtual${LAT}_none_rtc_$rtc"
  [ -f "$OUT/$name/summary.json" ] && continue
  echo "== $name $(date -u +%T)"
  "${VS[@]}" sim --robot libero-mock --preset libero64 --suite goal --episodes "$N" --guidance none \
      --executor realtime --virtual-latency-ms "$LAT" --rtc "$rtc" --backend onnxruntime --seed 0 --no-record \
      --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  grep -E "^success|^replans|^realtime" "$OUT/$name.log" || true
done
.venv/bin/python scripts/compare_success.py --a "$OUT/libero_virtual${LAT}_none_rtc_guided" \
    --b "$OUT/libero_virtual${LAT}_none_rtc_off" --names guided off --out "$OUT/comparison.json"
