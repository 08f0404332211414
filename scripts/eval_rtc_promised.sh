#!/usr/bin/env bash
# Guided real-time chunking with the chunk installed at its promised tick, against RTC off (issue 47;
# the plan is in docs/realtime_chunking.md). Reporting seed 0, fixed before any run; nothing is tuned.
#   bash scripts/eval_rtc_promised.sh [OUT (default runs/rtc_promised)] [EPISODES (default 50)]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/rtc_promised}
N=${2:-50}
VS=(.venv/bin/python -m vam_cli.main)
mkdir -p "$OUT"
for rtc in guided off; do
  name="libero_realtime_none_rtc_$rtc"
  [ -f "$OUT/$name/summary.json" ] && continue
  echo "== $name $(date -u +%T)"
  "${VS[@]}" sim --robot libero-mock --preset libero64 --suite goal --episodes "$N" --guidance none \
      --executor realtime --rtc "$rtc" --seed 0 --no-record --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  grep -E "^success|^replans|^realtime" "$OUT/$name.log" || true
done
.venv/bin/python scripts/compare_success.py --a "$OUT/libero_realtime_none_rtc_guided" \
    --b "$OUT/libero_realtime_none_rtc_off" --names guided off --out "$OUT/comparison.json"
