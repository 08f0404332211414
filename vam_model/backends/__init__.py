"""DiT backends behind one interface, chosen by `BackendConfig.name`: torch, onnxruntime, tensorrt.

    backend = make_backend(BackendConfig(name="onnxruntime"), model)
    v = backend.velocity(x, mask, sigma_frames, text)      # same signature as VideoDiT.velocity
    f = backend.features(x, mask, sigma_frames, text)      # same as VideoDiT.features (block k)
"""
from __future__ import annotations

from typing import Callable

from .base import BACKENDS, PARITY_BOUNDS, BackendConfig, BackendUnavailable, DiTBackend, parity, within_bounds

__all__ = ["BACKENDS", "PARITY_BOUNDS", "BackendConfig", "BackendUnavailable", "DiTBackend", "make_backend",
           "parity", "within_bounds"]


def make_backend(cfg: BackendConfig, model, progress: Callable[[str], None] = print) -> DiTBackend:
    """The backend `cfg.name` for `model` (a VideoActionModel); raises BackendUnavailable if it cannot run here."""
    # each backend is imported when chosen: onnxruntime and tensorrt are optional extras
    if cfg.name == "torch":
        from .torch_backend import TorchBackend

        return TorchBackend(model, compile=cfg.compile)
    if cfg.name == "onnxruntime":
        from .ort_backend import OrtBackend

        return OrtBackend(model, cfg, progress=progress)
    if cfg.name == "tensorrt":
        from .tensorrt_backend import TensorRTBackend

        return TensorRTBackend(model, cfg, progress=progress)
    raise ValueError(f"unknown backend {cfg.name!r}; known: {', '.join(BACKENDS)}")
