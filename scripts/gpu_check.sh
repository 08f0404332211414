#!/usr/bin/env bash
# GPU check: on a CUDA machine, build TensorRT engines of the DiT feature extractor for the
# `real` and `libero` presets (random weights), check parity with torch eager fp32, and time
# torch eager / torch.compile / TensorRT plus a replan composed from measured stages and the
# fraction of the bf16 peak reached. One JSON out; aims at 10 minutes on an H200.
#
#   bash scripts/gpu_check.sh [OUT.json] [extra args of vam_bench.gpu_check]
#   e.g. bash scripts/gpu_check.sh gpu_check.json --preset tiny --preset libero
#
# Needs: an NVIDIA driver, a CUDA build of torch in .venv (or the active Python), and pip
# access for tensorrt / onnxscript if they are missing. Goal on an H200: unguided replan of
# `real` <= 70 ms, guided <= 400 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check.json}"
shift || true
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu_check: no nvidia-smi on this machine: it needs an NVIDIA GPU and driver" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check: $PY has a torch without CUDA ($("$PY" -c 'import torch; print(torch.__version__)'));" \
         "install a CUDA build of torch first" >&2
    exit 2
fi
# what the check needs beyond the CPU environment (installed only when missing)
for mod_pkg in tensorrt:tensorrt onnxscript:onnxscript onnx:onnx; do
    mod="${mod_pkg%%:*}"; pkg="${mod_pkg##*:}"
    if ! "$PY" -c "import $mod" >/dev/null 2>&1; then
        echo "gpu_check: installing $pkg"
        "$PY" -m pip install -q "$pkg"
    fi
done
if printf '%s\n' "$@" | grep -qx fp8; then
    "$PY" -c 'import modelopt.onnx.quantization' >/dev/null 2>&1 || "$PY" -m pip install -q 'nvidia-modelopt[onnx]'
fi
"$PY" -c 'import tensorrt, torch; print("tensorrt", tensorrt.__version__, "| torch", torch.__version__, "| CUDA", torch.version.cuda)'

# 600 s wall limit: the check itself stops before a preset that would not fit (--budget-s)
timeout 600 "$PY" -m vam_bench.gpu_check --json "$OUT" "$@"
