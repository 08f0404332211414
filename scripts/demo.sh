#!/usr/bin/env bash
# Set up (scripts/setup_env.sh) and run the main job: a closed-loop simulation demo of the
# video-action policy on the mocked LIBERO bridge: one goal episode per task at seed 0 (the
# reporting kind of run, not picked for its outcome), in realtime (sim's default: the bridge steps at
# 20 Hz while the policy infers, as on the robot). A realtime run needs the machine to keep up: an
# episode in which it did not (chunks dropped, ticks missed or held: a busy machine) is run again in
# lockstep, and so is the rest of the run (--overload lockstep; the closing lines say which and why).
# `--executor lockstep` runs every episode in lockstep (deterministic, how results are reported).
# On a CPU the networks run in onnxruntime: the first run exports the graphs once (about a minute),
# cached under ~/.cache/vam_stack/onnx. Times on this project's 2-core machine: README.md.
# Extra arguments go to `vam-stack sim` (e.g. --suite goal_ood --guidance flat). The demo's own
# output directory (runs/demo, or $VAM_DEMO_OUT) is rewritten on every run (--overwrite).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
OUT="${VAM_DEMO_OUT:-runs/demo}"
FALLBACK=(--overload lockstep)        # only where a wall-clock realtime run is what the arguments ask for
for a in "$@"; do
  case "$a" in
    --executor|--executor=*|--overload|--overload=*|--virtual-latency-ms*|--policy*|--robot*|--lockstep-delay*) FALLBACK=() ;;
  esac
done
vam-stack sim --suite goal --episodes 10 --seed 0 --guidance tr_adaptive --out "$OUT" --overwrite ${FALLBACK[@]+"${FALLBACK[@]}"} "$@"
