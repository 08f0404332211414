#!/usr/bin/env bash
# The TR-by-block study (docs/paper_study.md, "TR by phase against k and sigma_v"): for every DiT block
# k a new head on the frozen pretrained + LoRA DiT (config/study/tr_block_head.yaml), then its TR
# study (every solver grid index; SUITES, default "goal goal_ood"), its ID closed-loop cell (goal, none,
# 100 episodes, the study's reporting seeds 0 and 1) and, with PHASE=1, its swap test (vam-stack
# tr-phase on goal). Resumable: a finished run or cell is skipped.
#   bash scripts/tr_block_study.sh [K ...]        (default: 1 2 3 4)
#   SUITES=goal PHASE=1 bash scripts/tr_block_study.sh 3 4
set -euo pipefail
cd "$(dirname "$0")/.."
VS=${VS:-vam-stack}
ROOT=runs/study/tr_block
DATA=docs/data/paper_study/tr_block
[ -d runs/demos_goal ] || $VS collect --suites goal --episodes-per-task 50 --seed 100 --workers 2 --out runs/demos_goal
for k in "${@:-1 2 3 4}"; do
  for kk in $k; do
    ck=$ROOT/k$kk/model.safetensors
    if [ ! -f "$ROOT/k$kk/done" ]; then
      $VS train --config config/study/tr_block_head.yaml --set feature_block=$kk --out $ROOT/k$kk \
        $([ -f $ROOT/k$kk/train_state.pt ] && echo --resume)
      touch $ROOT/k$kk/done
    fi
    for suite in ${SUITES:-goal goal_ood}; do
      [ -f $DATA/k$kk/$suite/tr_study.json ] || $VS tr-study --checkpoint $ck --suite $suite --episodes 20 \
        --every 5 --out $DATA/k$kk/$suite
    done
    [ -f $DATA/k$kk/eval_goal_none/results.json ] && grep -q '"complete": true' $DATA/k$kk/eval_goal_none/results.json \
      || $VS eval --checkpoint $ck --suites goal --guidance none --seeds 0,1 --episodes-per-task 5 \
        --out $DATA/k$kk/eval_goal_none --overwrite
    if [ "${PHASE:-0}" = 1 ] && [ ! -f $DATA/k$kk/tr_phase/tr_phase.json ]; then
      $VS tr-phase --checkpoint $ck --suite goal --episodes 20 --every 5 --out $DATA/k$kk/tr_phase --overwrite
    fi
  done
done
