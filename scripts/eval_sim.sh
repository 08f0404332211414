#!/usr/bin/env bash
# The evaluation behind docs/training.md: goal (ID) and goal_ood (OOD) for none / flat / tr_adaptive
# on the reporting seeds 0 and 1 (5 episodes per task per seed = 100 episodes per cell), the
# scripted expert on the same seeds, and the TR study; two single-thread workers side by side.
#   bash scripts/eval_sim.sh [CHECKPOINT] [OUT]
# An OUT that already holds results is refused (hours of results are not replaced by accident);
# VAM_EVAL_OVERWRITE=1 reruns into it.
set -euo pipefail
cd "$(dirname "$0")/.."
CK="${1:-models/libero64.safetensors}"
OUT="${2:-runs/eval_sim}"
[ -f "$CK" ] || { echo "checkpoint $CK not found" >&2; exit 2; }
[ -x .venv/bin/vam-stack ] || { echo ".venv missing: run bash scripts/setup_env.sh first" >&2; exit 2; }
OW=()
if [ "${VAM_EVAL_OVERWRITE:-0}" = 1 ]; then
  OW=(--overwrite)
else
  for d in id ood expert tr_study; do
    if [ -n "$(ls -A "$OUT/$d" 2>/dev/null)" ]; then
      echo "eval_sim: $OUT/$d already holds results; VAM_EVAL_OVERWRITE=1 reruns into $OUT, or pass another OUT" >&2
      exit 2
    fi
  done
fi
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
ev() {  # suite, out name
  .venv/bin/vam-stack eval --checkpoint "$CK" --suites "$1" --episodes-per-task 5 --seeds 0,1 \
    --guidance none,flat,tr_adaptive --out "$OUT/$2" "${OW[@]}" > "$OUT/$2.log" 2>&1
  echo "$2 done $(date -u)"
}
(ev goal id && .venv/bin/vam-stack eval --policy expert --suites goal,goal_ood --episodes-per-task 5 --seeds 0,1 \
   --out "$OUT/expert" "${OW[@]}" > "$OUT/expert.log" 2>&1 && echo "expert done $(date -u)") &
A=$!
(ev goal_ood ood && .venv/bin/vam-stack tr-study --checkpoint "$CK" --episodes 20 --every 5 \
   --out "$OUT/tr_study" > "$OUT/tr_study.log" 2>&1 && echo "tr-study done $(date -u)") &
B=$!
wait $A && wait $B
cat "$OUT"/{id,ood,expert}/results.md
echo "TR study: $OUT/tr_study/tr_study.json, $OUT/tr_study/tr_study.png"
