#!/usr/bin/env bash
# Claims 3 and 4 of docs/paper_study.md at the n their plan fixed: 500 new pairs per cell (reporting seeds
# 20-29, 5 episodes per task per seed, the LoRA model), pooled with the committed 100 (seeds 0, 1).
#   bash scripts/eval_claims34.sh [OUT (default docs/data/paper_study/claims34_extension)]
# Another model, its cells alone (no committed cells to pool with):
#   CKPT=runs/v0_dropout/model.safetensors OLD= SEEDS=0,1,20,21,22,23,24,25,26,27,28,29 \
#       bash scripts/eval_claims34.sh runs/claims34_v0_dropout          # 600 pairs per cell
# A cell whose results.json is complete is skipped, so the script resumes after an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-docs/data/paper_study/claims34_extension}"
VS=(.venv/bin/python -m vam_cli.main)
CKPT="${CKPT:-models/study/libero64_lora4.safetensors}"
OLD="${OLD-docs/data/paper_study/eval/lora}"       # empty: compare the new cells alone
SEEDS="${SEEDS:-20,21,22,23,24,25,26,27,28,29}"
cell() {  # name suite guidance
  [ -f "$OUT/$1/results.json" ] && grep -q '"complete": true' "$OUT/$1/results.json" && return
  echo "== $1 $(date -u +%T)"
  "${VS[@]}" eval --checkpoint "$CKPT" --suites "$2" --guidance "$3" --seeds "$SEEDS" --episodes-per-task 5 \
      --workers 2 --out "$OUT/$1" --overwrite > "$OUT/$1.log" 2>&1
}
mkdir -p "$OUT"
cell id_none goal none
cell id_flat goal flat
cell id_tr goal tr_adaptive
cell ood_none goal_ood none
cell ood_tr goal_ood tr_adaptive
cmp() {  # label sign suite a-cell b-cell a-guidance b-guidance
  echo "-- $1"
  if [ -n "$OLD" ]; then
    "${VS[@]}" compare --a "$OLD/$3/$6/results.json" "$OUT/$4/results.json" \
        --b "$OLD/$3/$7/results.json" "$OUT/$5/results.json" --sign "$2" --json "$OUT/$1.json"
  fi
  echo "   (the new cells alone)"
  "${VS[@]}" compare --a "$OUT/$4/results.json" --b "$OUT/$5/results.json" --sign "$2" --json "$OUT/$1_new.json"
}
cmp claim3_ood 1 goal_ood ood_tr ood_none tr_adaptive none
cmp claim3_id 1 goal id_tr id_none tr_adaptive none
cmp claim4 -1 goal id_flat id_none flat none
