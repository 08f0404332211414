#!/usr/bin/env bash
# The third amendment of docs/your_data.md: the closed-loop question asked inside the shipped yam64
# recipe (above the floor). Arm A is the recipe with its 40 noisy seed-100 handovers recorded through the
# ROS graph (vam-stack record with collect's noise -> MCAP -> import, the raw command as the action) in
# place of the collected ones; arm B is the shipped weights (models/yam64.safetensors, the ninth run).
# Both are evaluated on the reporting seed 0 (20 handover episodes, none, lockstep) and compared episode
# by episode; the offline action error (scripts/compare_action_error.py) is printed beside it.
#   bash scripts/eval_your_data_recipe.sh [OUT (default runs/issue46b)] [HELDOUT (default runs/issue46/heldout_seed0)]
# Steps already done (their output exists) are skipped, so the script resumes after an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/issue46b}"
HELDOUT="${2:-runs/issue46/heldout_seed0}"
VS=(.venv/bin/python -m vam_cli.main)
[ -x .venv/bin/python ] || { echo ".venv missing: run bash scripts/setup_env.sh first" >&2; exit 2; }
mkdir -p "$OUT"
step() { echo "== $1 $(date -u +%T)"; }
NOISE=(--view-size 64x48 --joint-noise 0.03 --noise-every 2 --noise-where free-space --workers 2)
collect() { [ -f "$OUT/$1/meta/info.json" ] || { step "collect $1"; "${VS[@]}" collect --robot yam-mujoco "${@:2}" "${NOISE[@]}" --out "$OUT/$1"; }; }
# the recipe's sets (config/train_yam64.yaml), its seed-100 base split into the handovers and the rest
collect demos_yam_free_rt --tasks relay,tray_lift --episodes-per-task 40 --seed 100
collect demos_yam_free_handover --tasks handover --episodes-per-task 40 --seed 100
collect demos_yam_regrasp101 --tasks handover --episodes-per-task 40 --seed 101 --miss-m 0.05
collect demos_yam_late102 --tasks handover --episodes-per-task 40 --seed 102 --miss-m 0.05 --miss-when at-meet
.venv/bin/python - "$OUT" <<'PY'
import json, sys
n = lambda d: json.load(open(f"{sys.argv[1]}/{d}/meta/info.json"))["total_frames"]
base = n("demos_yam_free_rt") + n("demos_yam_free_handover")
for name, got, ninth in (("base (relay, tray_lift + handover)", base, 47213),
                         ("regrasp101", n("demos_yam_regrasp101"), 22454), ("late102", n("demos_yam_late102"), 26538)):
    print(f"{name}: {got} frames, the ninth run's {ninth}: {'same' if got == ninth else 'DIFFERENT'}")
PY
[ -f "$OUT/recordings/episodes.json" ] || { step record; "${VS[@]}" record --task handover --episodes 40 --seed 100 \
    --joint-noise 0.03 --noise-every 2 --noise-where free-space --out "$OUT/recordings"; }
printf 'mcap_import:\n  max_age_s: 0.15\n' > "$OUT/mapping.yaml"
[ -f "$OUT/demos_rec/meta/info.json" ] || { step import; "${VS[@]}" import --format mcap "$OUT/recordings" --preset yam64 \
    --task handover --mapping "$OUT/mapping.yaml" --out "$OUT/demos_rec"; }
# the trainer's base set holds every instruction and sets the statistics: the recipe's base is the three tasks
# together, so arm A's base is the recorded handovers with the collected relay and tray_lift (the same merge of the
# collected handovers reproduces the shipped weights' statistics exactly)
[ -f "$OUT/demos_base_rec/meta/info.json" ] || { step merge; "${VS[@]}" merge "$OUT/demos_rec" "$OUT/demos_yam_free_rt" \
    --out "$OUT/demos_base_rec"; }
if [ ! -f "$OUT/train_rec/model.safetensors" ] || [ -f "$OUT/train_rec.running" ]; then
  step "train rec"
  touch "$OUT/train_rec.running"
  RESUME=(); [ -f "$OUT/train_rec/train_state.pt" ] && RESUME=(--resume)
  "${VS[@]}" train --config config/train_yam64.yaml --dataset "$OUT/demos_base_rec" \
      --set "extra_datasets=[$OUT/demos_yam_regrasp101,$OUT/demos_yam_late102]" \
      --set joint_frac=0.7228 --steps 11566 --time-budget-min 1000 --out "$OUT/train_rec" "${RESUME[@]}" \
      > "$OUT/train_rec.log" 2>&1
  rm -f "$OUT/train_rec.running"
fi
step "closed loop"
for arm in rec shipped; do
  [ -f "$OUT/eval_$arm/summary.json" ] && continue
  ckpt="$OUT/train_rec/model.safetensors"; [ "$arm" = shipped ] && ckpt=models/yam64.safetensors
  OMP_NUM_THREADS=1 "${VS[@]}" sim --robot yam-mujoco --checkpoint "$ckpt" --task handover --episodes 20 --seed 0 \
      --guidance none --executor lockstep --no-record --out "$OUT/eval_$arm" > "$OUT/eval_$arm.log" 2>&1 &
done
wait
.venv/bin/python scripts/compare_success.py --a "$OUT/eval_rec" --b "$OUT/eval_shipped" --names recorded shipped \
    --out "$OUT/comparison.json"
step "offline"
.venv/bin/python scripts/compare_action_error.py --a "$OUT/train_rec/model.safetensors" \
    --b models/yam64.safetensors --states "$HELDOUT" --out "$OUT/action_error.json"
