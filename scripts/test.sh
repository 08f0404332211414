#!/usr/bin/env bash
# Set up (scripts/setup_env.sh) and run the whole test suite on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
exec python -m pytest -q "$@"
