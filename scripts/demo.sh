#!/usr/bin/env bash
# Set up (scripts/setup_env.sh) and run the main job: a closed-loop simulation demo of the
# video-action policy on the mocked LIBERO bridge (a few episodes, a few minutes on 2 cores).
# Extra arguments go to `vam-stack sim` (e.g. --suite goal_ood --guidance flat).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
OUT="${VAM_DEMO_OUT:-runs/demo}"
vam-stack sim --suite goal --episodes 3 --seed 0 --guidance tr_adaptive --out "$OUT" "$@"
