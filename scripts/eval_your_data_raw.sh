#!/usr/bin/env bash
# The second amendment of docs/your_data.md: the 40 scenes recorded again with the teleoperator's raw
# command (/teleop/joint_command, the import's default action), trained with the same 3000 steps, compared
# with the collect arm offline (scripts/compare_action_error.py) and in closed loop.
#   bash scripts/eval_your_data_raw.sh [OUT (default runs/issue46)]   (after scripts/eval_your_data.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/issue46}"
VS=(.venv/bin/python -m vam_cli.main)
step() { echo "== $1 $(date -u +%T)"; }
[ -f "$OUT/recordings_raw/episodes.json" ] || { step record; "${VS[@]}" record --task handover --episodes 40 --seed 100 --out "$OUT/recordings_raw"; }
[ -f "$OUT/demos_raw/meta/info.json" ] || { step import; "${VS[@]}" import --format mcap "$OUT/recordings_raw" --preset yam64 --task handover --mapping "$OUT/mapping.yaml" --out "$OUT/demos_raw"; }
if [ ! -f "$OUT/train_raw/model.safetensors" ] || [ -f "$OUT/train_raw.running" ]; then
  step "train raw"
  touch "$OUT/train_raw.running"
  RESUME=(); [ -f "$OUT/train_raw/train_state.pt" ] && RESUME=(--resume)
  "${VS[@]}" train --config config/train_yam64.yaml --dataset "$OUT/demos_raw" --set "extra_datasets=[]" \
      --steps 3000 --time-budget-min 1000 --out "$OUT/train_raw" "${RESUME[@]}" > "$OUT/train_raw.log" 2>&1
  rm -f "$OUT/train_raw.running"
fi
step "offline"
.venv/bin/python scripts/compare_action_error.py --a "$OUT/train_raw/model.safetensors" \
    --b "$OUT/train_collect/model.safetensors" --states "$OUT/heldout_seed0" --out "$OUT/action_error_raw.json"
step "closed loop"
[ -f "$OUT/eval_raw/summary.json" ] || OMP_NUM_THREADS=2 "${VS[@]}" sim --robot yam-mujoco \
    --checkpoint "$OUT/train_raw/model.safetensors" --task handover --episodes 20 --seed 0 --guidance none \
    --executor lockstep --no-record --out "$OUT/eval_raw" > "$OUT/eval_raw.log" 2>&1
grep -E "^success|^furthest" "$OUT/eval_raw.log"
