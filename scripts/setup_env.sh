#!/usr/bin/env bash
# Create ./.venv and install vam_stack with everything the demo and the tests need.
# Idempotent: re-running only installs what is missing. Usage: bash scripts/setup_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

# System libraries: pyrealsense2's wheel links libusb-1.0; MuJoCo renders offscreen through EGL
# with Mesa's software rasteriser (libegl1, libgl1-mesa-dri).
APT_PKGS="libusb-1.0-0 libegl1 libgl1-mesa-dri libxml2-utils"  # xmllint: the package.xml lint test
MISSING=""
for p in $APT_PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || MISSING="$MISSING $p"
done
if [ -n "$MISSING" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else SUDO="-"; fi
  if [ "$SUDO" = "-" ]; then
    echo "[setup] WARNING: missing Debian packages:$MISSING and no root/sudo; RealSense/MuJoCo-render tests will skip" >&2
  else
    echo "[setup] installing Debian packages:$MISSING"
    $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq $MISSING >/dev/null
  fi
fi

# ROS 2: a sourced ROS 2 install (its rclpy importable by $PY) is used as it is, through a venv that
# sees the system's site-packages; everywhere else the pinned Jazzy wheels (extra `ros`) install.
EXTRAS="test,realsense,export,sim,ros"
VENV_FLAGS=""
if [ -n "${ROS_DISTRO:-}" ] && "$PY" -c "import rclpy" 2>/dev/null; then
  echo "[setup] using the sourced ROS 2 ${ROS_DISTRO} (its rclpy and message packages)"
  EXTRAS="test,realsense,export,sim"
  VENV_FLAGS="--system-site-packages"
fi

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  "$PY" -m venv $VENV_FLAGS .venv
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
# The CPU build of torch first, so the range in setup.py is already satisfied
# (a plain `pip install torch` would pull a multi-GB CUDA build).
python -c "import torch" 2>/dev/null || pip install -q "torch==2.13.0"
pip install -q -e ".[$EXTRAS]"
echo "[setup] ok: $(python -c 'import torch, sys, rclpy; print("python", sys.version.split()[0], "torch", torch.__version__, "rclpy from", rclpy.__file__.rsplit("/", 2)[0])')"
