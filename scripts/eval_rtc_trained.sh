#!/usr/bin/env bash
# Real-time chunking's trained variant (issue 47; plan in docs/realtime_chunking.md, written before running):
# the shipped libero64 head fine-tuned with the committed-prefix objective (config/study/rtc_trained_head.yaml),
# then libero64 goal, reporting seed 0, 50 episodes, guidance none, onnxruntime:
#   shipped and new head in plain lockstep (d = 0); the new head with rtc off and trained in the delayed
#   lockstep (d = 3) and on the virtual clock (138 ms); with WALL=1 also on the wall clock (torch, idle machine).
# Every pair is compared episode by episode (scripts/compare_success.py). Resumable: a finished cell is skipped.
#   bash scripts/eval_rtc_trained.sh [OUT (default runs/rtc_trained)] [EPISODES (default 50)]
#   CONTROL=1 also runs the control fine-tune (config/study/rtc_control_head.yaml) at d = 0, d = 3 and on the
#   virtual clock at 138 and 100 ms (added after the control's d = 0 and d = 3 cells had run); with
#   CONTROL_WALL=1 also on the wall clock, onnxruntime.
#   SEED=1 bash scripts/eval_rtc_trained.sh runs/rtc_trained_s1      (the second reporting seed; the head stays
#                                                                     runs/rtc_trained/head unless HEAD_DIR says)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/rtc_trained}
N=${2:-50}
VS=${VS:-.venv/bin/vam-stack}
SEED=${SEED:-0}
HEAD_DIR=${HEAD_DIR:-runs/rtc_trained/head}
HEAD=$HEAD_DIR/model.safetensors
[ -d runs/demos_goal ] || $VS collect --suites goal --episodes-per-task 50 --seed 100 --workers 2 --out runs/demos_goal
if [ ! -f "$HEAD_DIR/done" ]; then
  $VS train --config config/study/rtc_trained_head.yaml --out "$HEAD_DIR" $([ -f "$HEAD_DIR/train_state.pt" ] && echo --resume)
  touch "$HEAD_DIR/done"
fi
mkdir -p "$OUT"
. scripts/sim_cell.sh
run() {  # name, then sim arguments
  local name=$1; shift
  sim_cell "$OUT" "$name" --executor lockstep --robot libero-mock --preset libero64 --suite goal --episodes "$N" \
    --seed "$SEED" --guidance none --no-record "$@"
}
pair() {  # a, b
  .venv/bin/python scripts/compare_success.py --a "$OUT/$1" --b "$OUT/$2" --names "$1" "$2" --out "$OUT/$1-vs-$2.json"
}
ORT=(--backend onnxruntime)
run shipped_d0 "${ORT[@]}"
run new_d0 --checkpoint "$HEAD" "${ORT[@]}"
run shipped_d3_rtc_off "${ORT[@]}" --lockstep-delay 3 --rtc off
for rtc in off trained; do
  run "new_d3_rtc_$rtc" --checkpoint "$HEAD" "${ORT[@]}" --lockstep-delay 3 --rtc "$rtc"
  run "new_virtual138_rtc_$rtc" --checkpoint "$HEAD" "${ORT[@]}" --executor realtime --virtual-latency-ms 138 --rtc "$rtc"
done
pair new_d0 shipped_d0
pair new_d3_rtc_trained new_d3_rtc_off
pair new_virtual138_rtc_trained new_virtual138_rtc_off
pair new_d3_rtc_trained new_d0
pair new_d3_rtc_off shipped_d3_rtc_off
if [ "${CONTROL:-0}" = 1 ]; then   # the control fine-tune (no prefix objective): d = 0 and d = 3, RTC off
  CTRL=runs/rtc_trained/control
  if [ ! -f "$CTRL/done" ]; then
    $VS train --config config/study/rtc_control_head.yaml --out "$CTRL" $([ -f "$CTRL/train_state.pt" ] && echo --resume)
    touch "$CTRL/done"
  fi
  run control_d0 --checkpoint "$CTRL/model.safetensors" "${ORT[@]}"
  run control_d3_rtc_off --checkpoint "$CTRL/model.safetensors" "${ORT[@]}" --lockstep-delay 3 --rtc off
  run control_virtual138_rtc_off --checkpoint "$CTRL/model.safetensors" "${ORT[@]}" --executor realtime \
    --virtual-latency-ms 138 --rtc off
  run control_virtual100_rtc_off --checkpoint "$CTRL/model.safetensors" "${ORT[@]}" --executor realtime \
    --virtual-latency-ms 100 --rtc off
  pair control_d3_rtc_off control_d0
  pair control_virtual138_rtc_off control_d0
  pair control_virtual100_rtc_off control_d0
  if [ "${CONTROL_WALL:-0}" = 1 ]; then   # the control head on the wall clock, onnxruntime (its replans take ~50 ms here)
    run control_realtime_ort_rtc_off --checkpoint "$CTRL/model.safetensors" "${ORT[@]}" --executor realtime --rtc off
    run shipped_realtime_ort_rtc_off "${ORT[@]}" --executor realtime --rtc off
    pair control_realtime_ort_rtc_off control_d0
    pair shipped_realtime_ort_rtc_off shipped_d0
  fi
fi
if [ "${WALL:-0}" = 1 ]; then
  for rtc in off trained; do
    run "new_realtime_rtc_$rtc" --checkpoint "$HEAD" --backend torch --executor realtime --rtc "$rtc"
  done
  pair new_realtime_rtc_trained new_realtime_rtc_off
fi
