#!/usr/bin/env bash
# Set up (scripts/setup_env.sh) and run the main job: a closed-loop simulation demo of the
# video-action policy on the mocked LIBERO bridge: one goal episode per task at seed 0 (the
# reporting kind of run, not picked for its outcome), in realtime (sim's default: the bridge steps at
# 20 Hz while the policy infers; --executor lockstep repeats exactly), about a minute on 2 cores after set-up. On a
# CPU the networks run in onnxruntime: the first run exports the graphs once (about a minute more),
# cached under ~/.cache/vam_stack/onnx.
# Extra arguments go to `vam-stack sim` (e.g. --suite goal_ood --guidance flat). The demo's own
# output directory (runs/demo, or $VAM_DEMO_OUT) is rewritten on every run (--overwrite).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
OUT="${VAM_DEMO_OUT:-runs/demo}"
vam-stack sim --suite goal --episodes 10 --seed 0 --guidance tr_adaptive --out "$OUT" --overwrite "$@"
