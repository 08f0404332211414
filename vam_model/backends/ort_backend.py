"""`onnxruntime` backend: the exported DiT graphs in ONNX Runtime (CPU here, CUDA where present).

Graphs come from `BackendConfig.onnx_dir` (written by `vam-stack export onnx`) or, when that is
unset, are exported on first use into `<cache_dir>/onnx/<preset>-<weights hash>/` and reused
while the weights stay the same. A manifest whose preset or weights hash does not match the
model is refused, so stale graphs are never run against new weights.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from .base import BackendConfig, BackendUnavailable, DiTBackend

GRAPHS = ("dit_velocity", "dit_features")


def _manifest(onnx_dir: Path) -> dict:
    path = onnx_dir / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"no manifest.json in {str(onnx_dir)!r}: run `vam-stack export onnx --out {onnx_dir}`")
    return json.loads(path.read_text())


def ensure_onnx(model, cfg: BackendConfig, dtype: str = "fp32", progress=print) -> Path:
    """Directory holding the model's DiT graphs of `dtype`, exporting them if needed; checks the manifest."""
    from ..export import export_onnx, weights_hash

    whash = weights_hash(model.dit)
    if cfg.onnx_dir is not None:
        d = Path(cfg.onnx_dir).expanduser()
    else:
        d = Path(cfg.cache_dir).expanduser() / "onnx" / f"{model.cfg.name}-{whash}-{dtype}"
        if not (d / "manifest.json").is_file():
            progress(f"[onnx] exporting {model.cfg.name} DiT ({dtype}) to {d} (once per weights)")
            export_onnx(model, d, dtype=dtype, head=False, progress=progress)
    m = _manifest(d)
    if m.get("preset") != model.cfg.name:
        raise ValueError(f"{d}: graphs are for preset {m.get('preset')!r}, the model is {model.cfg.name!r}")
    if m.get("weights_hash") != whash:
        raise ValueError(f"{d}: graphs were exported from weights {m.get('weights_hash')!r}, "
                         f"the model's are {whash!r}; export again")
    if m.get("dtype") != dtype:
        raise ValueError(f"{d}: graphs are {m.get('dtype')!r}, wanted {dtype!r}")
    return d


def graph_path(onnx_dir: Path, graph: str, dtype: str) -> Path:
    p = onnx_dir / f"{graph}{'' if dtype == 'fp32' else '_' + dtype}.onnx"
    if not p.is_file():
        raise FileNotFoundError(f"missing ONNX graph {str(p)!r}")
    return p


class OrtBackend(DiTBackend):
    name = "onnxruntime"

    def __init__(self, model, cfg: BackendConfig):
        try:
            import onnxruntime as ort
        except ImportError:
            raise BackendUnavailable("backend 'onnxruntime' needs the onnxruntime package "
                                     "(onnxruntime-gpu for CUDA)") from None
        available = ort.get_available_providers()
        if cfg.device == "cuda" and "CUDAExecutionProvider" not in available:
            raise BackendUnavailable(f"backend 'onnxruntime' with device 'cuda': this onnxruntime has no "
                                     f"CUDAExecutionProvider (available: {available}); install onnxruntime-gpu")
        use_cuda = cfg.device == "cuda" or (cfg.device == "auto" and "CUDAExecutionProvider" in available)
        self.providers = (["CUDAExecutionProvider"] if use_cuda else []) + ["CPUExecutionProvider"]
        self.onnx_dir = ensure_onnx(model, cfg)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if cfg.threads:
            opts.intra_op_num_threads = cfg.threads
        self.sessions = {g: ort.InferenceSession(str(graph_path(self.onnx_dir, g, "fp32")), opts,
                                                 providers=self.providers) for g in GRAPHS}

    def _run(self, graph: str, x, mask, sigma_frames, text) -> torch.Tensor:
        feed = {"x": x, "mask": mask, "sigma_frames": sigma_frames, "text": text}
        feed = {k: np.ascontiguousarray(v.detach().to("cpu", torch.float32).numpy()) for k, v in feed.items()}
        return torch.from_numpy(self.sessions[graph].run(None, feed)[0])

    def velocity(self, x, mask, sigma_frames, text):
        return self._run("dit_velocity", x, mask, sigma_frames, text)    # [B, 16, T, h, w]

    def features(self, x, mask, sigma_frames, text):
        return self._run("dit_features", x, mask, sigma_frames, text)    # [B, T, gh*gw, D]

    def describe(self) -> dict:
        return {"backend": self.name, "providers": self.providers, "onnx_dir": str(self.onnx_dir)}

    def close(self) -> None:
        self.sessions = {}
