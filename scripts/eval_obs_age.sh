#!/usr/bin/env bash
# Observation age under tr_adaptive, and delta re-anchoring (issue 47; plan in docs/realtime_chunking.md,
# written before running). Shipped libero64 head, goal suite, onnxruntime, 50 episodes per seed.
#   bash scripts/eval_obs_age.sh [OUT (default runs/obs_age)] [EPISODES (default 50)]
#   PART=A  lockstep d = 0, 2, 3 and wall-clock realtime under tr_adaptive, reporting seeds 0 and 1
#   PART=B0 tuning seed 11: d = 3 with re-anchoring on and off, under none and tr_adaptive
#   PART=B  the same on reporting seeds 0 and 1, then wall-clock realtime tr_adaptive with re-anchoring
#   PART=C  yam64 handover, seed 0, 20 episodes: lockstep and realtime under none and tr_adaptive
# Every cell is lockstep unless it says --executor realtime. Resumable: a finished cell is skipped. Wall-clock cells want an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/obs_age}
N=${2:-50}
VS=${VS:-.venv/bin/vam-stack}
PART=${PART:-A}
mkdir -p "$OUT"
. scripts/sim_cell.sh
run() {  # name, then sim arguments
  local name=$1; shift
  sim_cell "$OUT" "$name" --executor lockstep --no-record --backend onnxruntime "$@"
}
libero() {  # name, seed, then sim arguments
  local name=$1 seed=$2; shift 2
  run "$name" --robot libero-mock --preset libero64 --suite goal --episodes "$N" --seed "$seed" "$@"
}
case $PART in
  A)
    for s in 0 1; do
      for d in 0 2 3; do libero "tr_d${d}_s$s" $s --guidance tr_adaptive --lockstep-delay $d; done
    done
    libero tr_realtime_s1 1 --guidance tr_adaptive --executor realtime --rtc off ;;
  B0)
    for g in none tr_adaptive; do
      for r in off on; do libero "${g}_d3_reanchor_${r}_s11" 11 --guidance $g --lockstep-delay 3 --reanchor $r; done
    done ;;
  B)
    for s in 0 1; do
      for g in none tr_adaptive; do
        for r in off on; do libero "${g}_d3_reanchor_${r}_s$s" $s --guidance $g --lockstep-delay 3 --reanchor $r; done
      done
    done
    for s in 0 1; do
      libero "tr_realtime_reanchor_on_s$s" $s --guidance tr_adaptive --executor realtime --rtc off --reanchor on
    done
    for s in 0 1; do   # added after part B0, before part B ran: realtime under none with re-anchoring
      libero "none_realtime_reanchor_on_s$s" $s --guidance none --executor realtime --rtc off --reanchor on
    done ;;
  C)
    for g in none tr_adaptive; do
      run "yam_${g}_lockstep" --robot yam-mujoco --task handover --episodes 20 --seed 0 --guidance $g
    done
    for g in none tr_adaptive; do
      run "yam_${g}_realtime" --robot yam-mujoco --task handover --episodes 20 --seed 0 --guidance $g \
        --executor realtime --rtc off
    done ;;
  *) echo "PART must be A, B0, B or C, got $PART" >&2; exit 2 ;;
esac
