#!/usr/bin/env bash
# The evaluation behind docs/robot_path.md: the shipped robot-path policy on the simulated
# bimanual YAM, reporting seed 0 only (fixed before training; demonstrations used seed 100):
# handover 20 episodes under none and tr_adaptive, relay and tray_lift 10 under none, all in
# lockstep, two single-thread workers side by side; then 5 handover episodes with the realtime
# executor, alone on the machine (its timing is what is measured). The expert's rates are in the
# collection's meta/info.json (and `--policy expert` reruns them).
#   bash scripts/eval_yam.sh [CHECKPOINT] [OUT] [ACTION_TEMPERATURE (default 1.0)]
# An OUT that already holds results is refused; VAM_EVAL_OVERWRITE=1 reruns into it.
set -euo pipefail
cd "$(dirname "$0")/.."
CK="${1:-models/yam64.safetensors}"
OUT="${2:-runs/eval_yam}"
TEMP="${3:-1.0}"
[ -f "$CK" ] || { echo "checkpoint $CK not found" >&2; exit 2; }
[ -x .venv/bin/vam-stack ] || { echo ".venv missing: run bash scripts/setup_env.sh first" >&2; exit 2; }
OW=()
if [ "${VAM_EVAL_OVERWRITE:-0}" = 1 ]; then
  OW=(--overwrite)
elif [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "eval_yam: $OUT already holds results; VAM_EVAL_OVERWRITE=1 reruns into it, or pass another OUT" >&2
  exit 2
fi
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
sim() {  # name, task, episodes, guidance, executor
  .venv/bin/vam-stack sim --robot yam-mujoco --checkpoint "$CK" --task "$2" --episodes "$3" --seed 0 \
    --guidance "$4" --executor "$5" --action-temperature "$TEMP" --no-record --out "$OUT/$1" "${OW[@]}" > "$OUT/$1.log" 2>&1
  echo "$1 done $(date -u)"
}
sim handover_none handover 20 none lockstep & sim handover_tr_adaptive handover 20 tr_adaptive lockstep & wait
sim relay_none relay 10 none lockstep & sim tray_lift_none tray_lift 10 none lockstep & wait
OMP_NUM_THREADS=2 sim handover_realtime handover 5 none realtime
grep -h "^success" "$OUT"/*.log
