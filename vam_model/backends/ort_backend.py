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

import json
import os
import shutil
from pathlib import Path

import numpy as np
import torch

from .base import BackendConfig, BackendUnavailable, DiTBackend
from .torch_backend import TorchBackend
from ..export import config_hash, export_onnx, weights_hash
from ..networks.head_io import HeadCache, HeadOutput

GRAPHS = ("dit_velocity", "dit_features")
HEAD_GRAPHS = ("head_prefix", "head_step")


def _manifest(onnx_dir: Path) -> dict:
    path = onnx_dir / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"no manifest.json in {str(onnx_dir)!r}: run `vam-stack export onnx --out {onnx_dir}`")
    return json.loads(path.read_text())


def ensure_onnx(model, cfg: BackendConfig, dtype: str = "fp32", progress=print) -> Path:
    """Directory holding the model's DiT graphs of `dtype`, exporting them if needed; checks the manifest."""
    whash, chash = weights_hash(model.dit), config_hash(model.cfg)
    if cfg.onnx_dir is not None:
        d = Path(cfg.onnx_dir).expanduser()
    else:
        d = Path(cfg.cache_dir).expanduser() / "onnx" / f"{model.cfg.name}-{whash}-{chash}-{dtype}"
        if not (d / "manifest.json").is_file():
            progress(f"[onnx] exporting {model.cfg.name} DiT ({dtype}) to {d} (once per weights)")
            _export_into(d, lambda tmp: export_onnx(model, tmp, dtype=dtype, head=False, progress=progress))
    m = _manifest(d)
    _check_manifest(d, m, model.cfg.name, "weights_hash", whash)
    _check_config(d, m, chash)
    if m.get("dtype") != dtype:
        raise ValueError(f"{d}: graphs are {m.get('dtype')!r}, wanted {dtype!r}")
    missing = [g for g in GRAPHS if f"{g}{'' if dtype == 'fp32' else '_' + dtype}" not in m.get("graphs", {})]
    if missing:
        raise FileNotFoundError(f"{d}: no {', '.join(missing)} graph (exported with --no-dit?); export again")
    return d


def ensure_head_onnx(model, cfg: BackendConfig, progress=print) -> Path:
    """Directory holding the model's fp32 head graphs (`head_prefix`, `head_step`), exporting them if needed."""
    hhash, chash = weights_hash(model.head), config_hash(model.cfg)
    if cfg.onnx_dir is not None:
        d = Path(cfg.onnx_dir).expanduser()
    else:
        d = Path(cfg.cache_dir).expanduser() / "onnx" / f"{model.cfg.name}-head-{hhash}-{chash}"
        if not (d / "manifest.json").is_file():
            progress(f"[onnx] exporting {model.cfg.name} head to {d} (once per weights)")
            _export_into(d, lambda tmp: export_onnx(model, tmp, dit=False, progress=progress))
    m = _manifest(d)
    missing = [g for g in HEAD_GRAPHS if g not in m.get("graphs", {})]
    if missing:
        raise FileNotFoundError(f"{d}: no {', '.join(missing)} graph (exported with --no-head?); "
                                f"export again without --no-head, or set backend.head_graphs false")
    _check_manifest(d, m, model.cfg.name, "head_weights_hash", hhash)
    _check_config(d, m, chash)
    return d


def _check_manifest(d: Path, m: dict, preset: str, key: str, want: str) -> None:
    if m.get("preset") != preset:
        raise ValueError(f"{d}: graphs are for preset {m.get('preset')!r}, the model is {preset!r}")
    if m.get(key) != want:
        what = "head weights" if key.startswith("head") else "weights"
        raise ValueError(f"{d}: graphs were exported from {what} {m.get(key)!r}, the model's are {want!r}; export again")


def _export_into(d: Path, export) -> None:
    """`export(tmp)` into a private directory beside `d`, then rename it to `d`. Processes exporting
    the same graphs at once (eval workers on an empty cache) never read each other's half-written
    files: the first rename wins, a later one finds `d` complete and drops its own copy."""
    tmp = d.with_name(f"{d.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    d.parent.mkdir(parents=True, exist_ok=True)
    try:
        export(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        tmp.rename(d)                                  # atomic; fails when another process's copy is there
    except OSError:
        if not (d / "manifest.json").is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def _check_config(d: Path, m: dict, want: str) -> None:
    """The graphs bake in config beyond the weights (block k, TR layer): a manifest without the
    config hash (an export older than it) or with another one is refused."""
    if m.get("config_hash") != want:
        raise ValueError(f"{d}: graphs were exported for model config {m.get('config_hash')!r} (feature block "
                         f"{m.get('feature_block')!r}), the model's config is {want!r}; export again")


def graph_path(onnx_dir: Path, graph: str, dtype: str) -> Path:
    p = onnx_dir / f"{graph}{'' if dtype == 'fp32' else '_' + dtype}.onnx"
    if not p.is_file():
        raise FileNotFoundError(f"missing ONNX graph {str(p)!r}")
    return p


class OrtBackend(DiTBackend):
    name = "onnxruntime"

    def __init__(self, model, cfg: BackendConfig, progress=print):
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
        if next(model.parameters()).device.type == "meta":
            raise BackendUnavailable("backend 'onnxruntime' needs the model's weights: it cannot run on the meta device")
        self.onnx_dir = ensure_onnx(model, cfg, progress=progress)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if cfg.threads:
            opts.intra_op_num_threads = cfg.threads
        # no spin-waiting after a run: idle ORT threads would otherwise take the cores from the
        # executor's tick thread and from torch (measured: the torch replan after an ORT one took 1.9x as long)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")

        def session(d: Path, g: str):
            return ort.InferenceSession(str(graph_path(d, g, "fp32")), opts, providers=self.providers)

        self.sessions = {g: session(self.onnx_dir, g) for g in GRAPHS}
        if cfg.head_graphs:
            self.head_dir = ensure_head_onnx(model, cfg, progress=progress)
            self.sessions.update({g: session(self.head_dir, g) for g in HEAD_GRAPHS})
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
