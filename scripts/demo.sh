#!/usr/bin/env bash
# Set up (scripts/setup_env.sh) and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
vam-stack model-info --preset tiny
vam-stack model-info --preset real
