"""`onnxruntime` backend: the exported DiT and head graphs in ONNX Runtime (CPU here, CUDA where present).

Graphs come from `BackendConfig.onnx_dir` (written by `vam-stack export onnx`) or, when that is
unset, are exported on first use into `<cache_dir>/onnx/<preset>-<weights hash>-<config hash>-<dtype>/`
(DiT) and `<cache_dir>/onnx/<preset>-head-<head weights hash>-<config hash>/` (head) and reused while
the weights and the model config stay the same. A manifest whose preset, weights hash or config hash
does not match the model is refused, so stale graphs are never run against new weights, nor a graph
that bakes in another feature block k or TR layer against a model with the same weights.

With `BackendConfig.head_graphs` false the head runs in torch eager beside the ORT DiT (the
backend's state before the head graphs existed; kept for the side-by-side benchmark).
Tensors cross into ORT through host numpy arrays: on a CUDA policy device that is a copy each
way per call (the GPU path is the `tensorrt` backend, which binds device memory directly).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .base import BackendConfig, BackendUnavailable, DiTBackend
from .torch_backend import TorchBackend
from ..networks.head_io import HeadCache, HeadOutput
from ..onnx_cache import (DIT_GRAPHS, HEAD_GRAPHS, CacheError, ensure_graphs, ensure_sets, needed_dit_graphs,
                          remove_graph)

GRAPHS = DIT_GRAPHS


def ensure_onnx(model, cfg: BackendConfig, dtype: str = "fp32", progress=print, checkpoint: str | None = None,
                graphs: tuple[str, ...] | None = None) -> Path:
    """Directory holding the model's DiT graphs of `dtype` (those it runs: `needed_dit_graphs`), exported
    if missing or damaged (vam_model/onnx_cache.py); checks the manifest against the model."""
    return ensure_graphs(model, cfg, "dit", graphs or needed_dit_graphs(model.cfg), dtype, progress, checkpoint)


def ensure_head_onnx(model, cfg: BackendConfig, progress=print, checkpoint: str | None = None) -> Path:
    """Directory holding the model's fp32 head graphs (`head_prefix`, `head_step`), exported if needed."""
    return ensure_graphs(model, cfg, "head", HEAD_GRAPHS, "fp32", progress, checkpoint)


def graph_path(onnx_dir: Path, graph: str, dtype: str) -> Path:
    p = onnx_dir / f"{graph}{'' if dtype == 'fp32' else '_' + dtype}.onnx"
    if not p.is_file():
        raise FileNotFoundError(f"missing ONNX graph {str(p)!r}")
    return p


class OrtBackend(DiTBackend):
    name = "onnxruntime"

    def __init__(self, model, cfg: BackendConfig, progress=print, checkpoint: str | None = None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise BackendUnavailable("backend 'onnxruntime' needs the onnxruntime package: pip install onnxruntime "
                                     "onnx onnxscript (the 'export' extra; onnxruntime-gpu for CUDA), or choose "
                                     "backend:=torch") from None
        available = ort.get_available_providers()
        if cfg.device == "cuda" and "CUDAExecutionProvider" not in available:
            raise BackendUnavailable(f"backend 'onnxruntime' with device 'cuda': this onnxruntime has no "
                                     f"CUDAExecutionProvider (available: {available}); install onnxruntime-gpu")
        use_cuda = cfg.device == "cuda" or (cfg.device == "auto" and "CUDAExecutionProvider" in available)
        self.providers = (["CUDAExecutionProvider"] if use_cuda else []) + ["CPUExecutionProvider"]
        if next(model.parameters()).device.type == "meta":
            raise BackendUnavailable("backend 'onnxruntime' needs the model's weights: it cannot run on the meta device")
        # every graph this model runs, announced and exported together (once per checkpoint)
        sets = [("dit", needed_dit_graphs(model.cfg), "fp32")] + ([("head", HEAD_GRAPHS, "fp32")] if cfg.head_graphs
                                                                  else [])
        self.onnx_dir, *head = ensure_sets(model, cfg, sets, progress, checkpoint)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if cfg.threads:
            opts.intra_op_num_threads = cfg.threads
        # no spin-waiting after a run: idle ORT threads would otherwise take the cores from the
        # executor's tick thread and from torch (measured: the torch replan after an ORT one took 1.9x as long)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")

        def sessions(d: Path, graphs: tuple[str, ...], ensure) -> dict:
            """The graphs' sessions; a graph onnxruntime cannot load (damaged past the manifest's size and
            hash, e.g. written by another tool) is exported again once where the cache owns it."""
            for attempt in (0, 1):
                out = {}
                for g in graphs:
                    path = graph_path(d, g, "fp32")
                    try:
                        out[g] = ort.InferenceSession(str(path), opts, providers=self.providers)
                    except Exception as e:      # onnxruntime's InvalidProtobuf, Fail, ... (no common base class)
                        why = f"{path}: onnxruntime cannot load it ({type(e).__name__}: {str(e).splitlines()[0]})"
                        if cfg.onnx_dir is not None or attempt:
                            raise CacheError(f"{why}; export it again (vam-stack export onnx --out DIR, or delete "
                                             f"{d} to let the cache export it)") from None
                        progress(f"[onnx] {why}: exported again")
                        remove_graph(d, path.stem, {"file": path.name})
                        d = ensure()
                        break
                else:
                    return out
            raise AssertionError("unreachable")

        self.sessions = sessions(self.onnx_dir, needed_dit_graphs(model.cfg),
                                 lambda: ensure_onnx(model, cfg, progress=progress, checkpoint=checkpoint))
        if cfg.head_graphs:
            self.head_dir = head[0]
            self.sessions.update(sessions(self.head_dir, HEAD_GRAPHS, lambda: ensure_head_onnx(
                model, cfg, progress=progress, checkpoint=checkpoint)))
            self.head_runtime, self._torch_head = "onnxruntime", None
        else:
            self.head_dir, self.head_runtime, self._torch_head = None, "torch", TorchBackend(model)

    def _run(self, graph: str, feed: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Run one session; outputs on the device of the first input."""
        dev = next(iter(feed.values())).device
        arrays = {k: np.ascontiguousarray(v.detach().to("cpu", torch.float32).numpy()) for k, v in feed.items()}
        return [torch.from_numpy(o).to(dev) for o in self.sessions[graph].run(None, arrays)]

    def velocity(self, x, mask, sigma_frames, text):
        feed = {"x": x, "mask": mask, "sigma_frames": sigma_frames, "text": text}
        return self._run("dit_velocity", feed)[0]                        # [B, 16, T, h, w]

    def features(self, x, mask, sigma_frames, text):
        feed = {"x": x, "mask": mask, "sigma_frames": sigma_frames, "text": text}
        return self._run("dit_features", feed)[0]                        # [B, T, gh*gw, D]

    def head_prefix(self, feats, sigma_v, state) -> HeadCache:
        if self._torch_head is not None:
            return self._torch_head.head_prefix(feats, sigma_v, state)
        keys, values = self._run("head_prefix", {"features": feats, "sigma_v": sigma_v, "state": state})
        return HeadCache(keys, values)                                   # [layers, B, 1, Lp, hd] each

    def head_step(self, cache: HeadCache, actions, sigma_a) -> HeadOutput:
        if self._torch_head is not None:
            return self._torch_head.head_step(cache, actions, sigma_a)
        feed = {"keys": cache.keys, "values": cache.values, "actions": actions, "sigma_a": sigma_a}
        return HeadOutput(*self._run("head_step", feed))                 # velocity, masses [B], attention [B, A, Tv]

    def describe(self) -> dict:
        return {"backend": self.name, "head": self.head_runtime, "providers": self.providers,
                "onnx_dir": str(self.onnx_dir), "head_dir": None if self.head_dir is None else str(self.head_dir)}

    def close(self) -> None:
        self.sessions = {}
