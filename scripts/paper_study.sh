#!/usr/bin/env bash
# The paper study at small scale, every stage (docs/paper_study.md): the goal_video pretraining
# set, the foundation checkpoint (video loss only), LoRA and full fine-tunes on the ID goal
# demonstrations, 100-episode evaluation cells of every model x {none, flat, tr_adaptive,
# tr_adaptive+running_min} x {goal, goal_ood}, the TR studies and the summary.
#   bash scripts/paper_study.sh [STUDY_YAML]        (default config/study/paper_study.yaml)
# Finished stages are skipped, so a stopped study resumes where it was; nothing finished is
# replaced. On this 2-core CPU: ~5 min of collection, 55 min per training run, ~1 h of
# evaluation per model. `--dry-run` as a second argument lists what would run.
set -euo pipefail
cd "$(dirname "$0")/.."
CFG="${1:-config/study/paper_study.yaml}"
[ -f "$CFG" ] || { echo "paper_study: $CFG not found" >&2; exit 2; }
[ -x .venv/bin/vam-stack ] || bash scripts/setup_env.sh
exec .venv/bin/vam-stack paper-study --config "$CFG" "${@:2}"
