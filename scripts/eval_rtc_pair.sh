#!/usr/bin/env bash
# Guided real-time chunking against RTC off in realtime, paired on the episodes (issue 47; the plans are in
# docs/realtime_chunking.md). Reporting seed 0, fixed before any run; nothing is tuned.
#   bash scripts/eval_rtc_pair.sh [OUT (default runs/rtc_obs)] [EPISODES (default 50)]
#       on the wall clock, torch (as every wall-clock realtime cell so far: it sets the replan latency, so d)
#   bash scripts/eval_rtc_pair.sh runs/rtc_virtual 50 138
#       on a virtual clock where every replan takes exactly 138 ms (deterministic; onnxruntime, since the
#       virtual clock ignores the backend's speed)
# The promised-install pair (docs/data/rtc_promised) was this script with OUT runs/rtc_promised, before
# the observation fix.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/rtc_obs}
N=${2:-50}
LAT=${3:-}
VS=(.venv/bin/python -m vam_cli.main)
if [ -n "$LAT" ]; then
  CLOCK=(--virtual-latency-ms "$LAT" --backend onnxruntime); KIND="virtual$LAT"
else
  CLOCK=(--backend torch); KIND="realtime"
fi
mkdir -p "$OUT"
for rtc in guided off; do
  name="libero_${KIND}_none_rtc_$rtc"
  [ -f "$OUT/$name/summary.json" ] && continue
  echo "== $name $(date -u +%T)"
  "${VS[@]}" sim --robot libero-mock --preset libero64 --suite goal --episodes "$N" --guidance none \
      --executor realtime "${CLOCK[@]}" --rtc "$rtc" --seed 0 --no-record --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  grep -E "^success|^replans|^realtime" "$OUT/$name.log" || true
done
.venv/bin/python scripts/compare_success.py --a "$OUT/libero_${KIND}_none_rtc_guided" \
    --b "$OUT/libero_${KIND}_none_rtc_off" --names guided off --out "$OUT/comparison.json"
