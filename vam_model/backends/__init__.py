"""DiT backends behind one interface, chosen by `BackendConfig.name`: torch, onnxruntime, tensorrt.

    backend = make_backend(BackendConfig(name="onnxruntime"), model)
    v = backend.velocity(x, mask, sigma_frames, text)      # same signature as VideoDiT.velocity
    f = backend.features(x, mask, sigma_frames, text)      # same as VideoDiT.features (block k)
"""
from __future__ import annotations

import importlib.util
from typing import Callable

from .base import BACKENDS, PARITY_BOUNDS, BackendConfig, BackendUnavailable, DiTBackend, parity, within_bounds

__all__ = ["BACKENDS", "PARITY_BOUNDS", "BackendConfig", "BackendUnavailable", "DiTBackend", "auto_backend",
           "make_backend", "parity", "within_bounds"]

NO_ORT = ("backend auto: onnxruntime is not installed, so the policy runs in torch (a yam64 replan: 7-16 s on a "
          "loaded 2-core CPU against 0.13-0.4 s in onnxruntime); pip install onnxruntime onnx onnxscript (the "
          "'export' extra) for onnxruntime, or backend:=torch to choose torch and silence this line")


def auto_backend(device_type: str, say: Callable[[str], None] | None = print) -> str:
    """What backend `auto` runs on a device of `device_type` ("cpu", "cuda"): onnxruntime on a CPU where
    it is installed (said in one line, `NO_ORT`, and torch where it is not), torch on CUDA."""
    if device_type != "cpu":
        return "torch"
    if importlib.util.find_spec("onnxruntime") is None:
        if say is not None:
            say(NO_ORT)
        return "torch"
    return "onnxruntime"


def make_backend(cfg: BackendConfig, model, progress: Callable[[str], None] = print,
                 checkpoint: str | None = None) -> DiTBackend:
    """The backend `cfg.name` for `model` (a VideoActionModel); raises BackendUnavailable if it cannot run here.
    `checkpoint`: the file the weights came from (an ONNX export then runs in a child process that loads it,
    stoppable at once: vam_model/onnx_cache.py)."""
    # each backend is imported when chosen: onnxruntime and tensorrt are optional extras
    if cfg.name == "torch":
        from .torch_backend import TorchBackend

        return TorchBackend(model, compile=cfg.compile)
    if cfg.name == "onnxruntime":
        from .ort_backend import OrtBackend

        return OrtBackend(model, cfg, progress=progress, checkpoint=checkpoint)
    if cfg.name == "tensorrt":
        from .tensorrt_backend import TensorRTBackend

        return TensorRTBackend(model, cfg, progress=progress, checkpoint=checkpoint)
    raise ValueError(f"unknown backend {cfg.name!r}; known: {', '.join(BACKENDS)}")
