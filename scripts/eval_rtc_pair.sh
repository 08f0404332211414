#!/usr/bin/env bash
# Guided real-time chunking against RTC off in realtime, paired on the episodes (issue 47; the plans are in
# docs/realtime_chunking.md). Reporting seed 0, fixed before any run; nothing is tuned. The backend is
# torch, as in every realtime cell so far (it sets the replan latency, and so d).
#   bash scripts/eval_rtc_pair.sh [OUT (default runs/rtc_obs)] [EPISODES (default 50)]
# The promised-install pair (docs/data/rtc_promised) was this script with OUT runs/rtc_promised, before
# the observation fix.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/rtc_obs}
N=${2:-50}
VS=(.venv/bin/python -m vam_cli.main)
mkdir -p "$OUT"
for rtc in guided off; do
  name="libero_realtime_none_rtc_$rtc"
  [ -f "$OUT/$name/summary.json" ] && continue
  echo "== $name $(date -u +%T)"
  "${VS[@]}" sim --robot libero-mock --preset libero64 --suite goal --episodes "$N" --guidance none \
      --executor realtime --rtc "$rtc" --backend torch --seed 0 --no-record --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  grep -E "^success|^replans|^realtime" "$OUT/$name.log" || true
done
.venv/bin/python scripts/compare_success.py --a "$OUT/libero_realtime_none_rtc_guided" \
    --b "$OUT/libero_realtime_none_rtc_off" --names guided off --out "$OUT/comparison.json"
