#!/usr/bin/env bash
# Build a CPU-only venv with lerobot 0.4.4 able to read/write local LeRobotDataset v3.0 folders.
# Usage: setup_venv.sh [VENV_DIR]   (default .lerobot_venv beside the repository); needs root for apt-get.
# Debian 12 + Python 3.11; torch comes from the local CPU wheel. 
set -euo pipefail
VENV=${1:-$(cd "$(dirname "$0")/../.." && pwd)/.lerobot_venv}
HERE=$(cd "$(dirname "$0")" && pwd)

# FFmpeg 5.1 shared libs for torchcodec (libtorchcodec_core5.so needs exactly these sonames)
if ! ldconfig -p | grep -q 'libavcodec.so.59'; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    libavutil57 libavcodec59 libavformat59 libavdevice59 libavfilter8 libswscale6 libswresample4
fi

python3 -m venv "$VENV"
PIP="$VENV/bin/pip"

# 1) torch first: CPU wheel from local disk (never the multi-GB CUDA one)
"$PIP" install torch==2.13.0
# 2) lerobot's needed deps by hand (lerobot 0.4.4 pins torch<2.11, torchvision<0.26, torchcodec<0.11)
#    torchvision 0.28.0 is the release whose metadata says torch==2.13.0; pandas kept <2.4 (lerobot's own pin)
"$PIP" install torchvision==0.28.0 \
  "datasets>=4.0.0,<5.0.0" "huggingface-hub>=0.34.2,<0.36.0" "accelerate>=1.10.0,<2.0.0" \
  "einops>=0.8.0,<0.9.0" "av>=15.0.0,<16.0.0" "jsonlines>=4.0.0,<5.0.0" "packaging>=24.2,<26.0" \
  "draccus==0.10.0" "termcolor>=2.4.0,<4.0.0" "deepdiff>=7.0.1,<9.0.0" "pandas>=2.2.2,<2.4.0" pyarrow
# 3) torchcodec built against torch 2.13 CPU (0.14+ wheels link libtorch_cuda; 0.10 lacks 2.13 symbols)
"$PIP" install --no-deps torchcodec==0.13.0
# 4) lerobot itself without its (torch-pinning) dependency list
"$PIP" install --no-deps lerobot==0.4.4
# 5) make the CUDA-built PyPI torchvision wheel load on CPU torch (stub libc10_cuda/libtorch_cuda)
bash "$HERE/torchvision_cpu_fix.sh" "$VENV"

# smoke test
HF_HUB_OFFLINE=1 "$VENV/bin/python" -c '
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.datasets.video_utils import get_safe_default_codec
import torch, torchvision, torchcodec, lerobot
print("lerobot", lerobot.__version__, "torch", torch.__version__, "torchvision", torchvision.__version__,
      "torchcodec", torchcodec.__version__, "default video backend:", get_safe_default_codec())
'
