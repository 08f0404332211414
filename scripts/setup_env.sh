#!/usr/bin/env bash
# Create ./.venv and install vam_stack with everything the demo and the tests need.
# Idempotent: re-running only installs what is missing. Usage: bash scripts/setup_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

# pyrealsense2's wheel links libusb-1.0 (Debian/Ubuntu: libusb-1.0-0).
if ! ldconfig -p 2>/dev/null | grep -q "libusb-1.0.so.0"; then
  if [ "$(id -u)" = 0 ]; then
    echo "[setup] installing libusb-1.0-0 (needed by pyrealsense2)"
    (apt-get update -qq && apt-get install -y -qq libusb-1.0-0) >/dev/null
  elif command -v sudo >/dev/null; then
    echo "[setup] installing libusb-1.0-0 with sudo (needed by pyrealsense2)"
    sudo apt-get update -qq && sudo apt-get install -y -qq libusb-1.0-0 >/dev/null
  else
    echo "[setup] WARNING: libusb-1.0-0 missing and no root/sudo: RealSense tests will be skipped" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
# The CPU build of torch first, so the range in setup.py is already satisfied
# (a plain `pip install torch` would pull a multi-GB CUDA build).
python -c "import torch" 2>/dev/null || pip install -q "torch==2.13.0"
pip install -q -e ".[test,realsense,export,sim]"
echo "[setup] ok: $(python -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)')"
