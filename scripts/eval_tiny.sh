#!/usr/bin/env bash
# Reproduce the evaluation in models/tiny.md: none / flat / tr_adaptive on goal + goal_ood (seed 0,
# 150-step cap) and the TR study, as two single-thread workers side by side (~25 min on 2 cores).
#   bash scripts/eval_tiny.sh [CHECKPOINT] [OUT] [EPISODES_PER_TASK]
set -euo pipefail
cd "$(dirname "$0")/.."
CK="${1:-models/tiny.safetensors}"
OUT="${2:-runs/eval_tiny}"
EPT="${3:-2}"
[ -f "$CK" ] || { echo "checkpoint $CK not found" >&2; exit 2; }
[ -x .venv/bin/vam-stack ] || { echo ".venv missing: run bash scripts/setup_env.sh first" >&2; exit 2; }
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
run_eval() {
  .venv/bin/vam-stack eval --checkpoint "$CK" --suites goal,goal_ood --episodes-per-task "$EPT" --seeds 0 \
    --guidance "$1" --max-steps 150 --plots --out "$OUT/$1" > "$OUT/$1.log" 2>&1
  echo "$1 done $(date -u)"
}
(run_eval none && run_eval tr_adaptive) &
A=$!
(run_eval flat && .venv/bin/vam-stack tr-study --checkpoint "$CK" --episodes 10 --every 5 \
   --out "$OUT/tr_study" > "$OUT/tr_study.log" 2>&1 && echo "tr-study done $(date -u)") &
B=$!
wait $A && wait $B
cat "$OUT"/{none,flat,tr_adaptive}/results.md
echo "TR study: $OUT/tr_study/tr_study.json, $OUT/tr_study/tr_study.png"
