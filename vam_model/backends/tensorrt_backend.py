"""`tensorrt` backend: engines built from the exported ONNX graphs, cached on disk.

Precision lives in the graph, not in builder flags: TensorRT 11 builds strongly typed
networks only (BuilderFlag.FP16/BF16/FP8 were removed), so
  fp16 / bf16  build from `dit_*_{fp16,bf16}.onnx` (weights and compute in that dtype, fp32 I/O);
  fp8          quantises the fp32 graph with NVIDIA ModelOpt (FP8 Q/DQ nodes on the GEMMs,
               calibrated on random inputs of the preset's geometry) and builds from that;
  fp32         builds from the fp32 graph.
The head's `head_prefix` / `head_step` engines (with `head_graphs`, the default) build from the
fp32 head graphs; TensorRT runs their GEMMs as TF32.
On TensorRT 10.x the network is created with the STRONGLY_TYPED flag, so both majors build
the same engine from the same graph.

Engine cache: `<cache_dir>/engines/<preset>-<graph>-<precision>-<key>.engine`, where the key
hashes the GPU name, the TensorRT version, the preset, the weights hash, the precision, the
graph, the profile's batch/frame range and the ONNX file's hash (`EngineKey`). Any change
builds a new engine; a `.json` beside each engine records the key's inputs.

Builds take minutes on a 2 B DiT: progress goes through TensorRT's IProgressMonitor (phase
starts/ends, and step counts at most every few seconds) to the `progress` callback.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .base import BackendConfig, BackendUnavailable, DiTBackend
from ..networks.head_io import HeadCache, HeadOutput
from .ort_backend import GRAPHS, ensure_head_onnx, ensure_onnx, graph_path
from .torch_backend import TorchBackend
from ..export import example_inputs


def require_tensorrt():
    """The tensorrt module, or BackendUnavailable saying what this machine lacks."""
    if not torch.cuda.is_available():
        raise BackendUnavailable(
            f"backend 'tensorrt' needs an NVIDIA GPU with CUDA, and this machine has none "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}; torch.cuda.is_available() is False). "
            f"Use backend 'torch' or 'onnxruntime' here, or run scripts/gpu_check.sh on a GPU machine.")
    try:
        import tensorrt as trt
    except ImportError:
        raise BackendUnavailable("backend 'tensorrt' needs the tensorrt Python package (pip install tensorrt), "
                                 "matching this machine's CUDA") from None
    return trt


@dataclass(frozen=True)
class EngineKey:
    gpu: str            # torch.cuda.get_device_name(): engines are not portable across GPU models
    tensorrt: str       # tensorrt.__version__: nor across TensorRT versions
    preset: str         # model geometry
    weights_hash: str   # checkpoint identity (export.weights_hash of the DiT)
    precision: str      # fp32 | fp16 | bf16 | fp8
    graph: str          # dit_velocity | dit_features
    builder_level: int  # optimisation level the engine was built at
    max_batch: int      # optimisation profile range
    max_frames: int
    onnx_sha: str       # the exact graph the engine was built from

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    def filename(self) -> str:
        return f"{self.preset}-{self.graph}-{self.precision}-{self.digest()}.engine"


def profile_shapes(mcfg, max_batch: int) -> dict[str, tuple[tuple, tuple, tuple]]:
    """(min, opt, max) shape of each DiT input: batch 1..max_batch, frames 2..T' (opt: 1 x T)."""
    c, (h, w) = mcfg.tokenizer.latent_channels, mcfg.latent_hw
    t, tp = mcfg.solver.latent_frames, mcfg.solver.plan_latent_frames
    lt, td = mcfg.dit.text_tokens, mcfg.dit.text_dim
    per = {"x": lambda b, f: (b, c, f, h, w), "mask": lambda b, f: (b, 1, f, h, w),
           "sigma_frames": lambda b, f: (b, f), "text": lambda b, f: (b, lt, td)}
    return {k: (fn(1, 2), fn(1, t), fn(max_batch, tp)) for k, fn in per.items()}


def head_profile_shapes(mcfg, max_batch: int) -> dict[str, dict[str, tuple[tuple, tuple, tuple]]]:
    """(min, opt, max) input shapes of the head engines: batch 1..max_batch (opt 1: the cond
    branch alone; guided replans batch up to 3 branches)."""
    h, r = mcfg.head, mcfg.robot
    t, n, d = mcfg.solver.latent_frames, mcfg.dit_tokens_per_frame, mcfg.dit.width
    lp = mcfg.head_video_tokens + 1
    prefix = {"features": lambda b: (b, t, n, d), "sigma_v": lambda b: (b,), "state": lambda b: (b, r.proprio_dim)}
    step = {"keys": lambda b: (h.layers, b, h.kv_heads, lp, h.head_dim),
            "values": lambda b: (h.layers, b, h.kv_heads, lp, h.head_dim),
            "actions": lambda b: (b, r.chunk, r.action_dim), "sigma_a": lambda b: (b,)}
    return {g: {k: (fn(1), fn(1), fn(max_batch)) for k, fn in per.items()}
            for g, per in (("head_prefix", prefix), ("head_step", step))}


def _monitor(trt, emit: Callable[[str], None], every_s: float = 5.0):
    class _Progress(trt.IProgressMonitor):
        def __init__(self):
            trt.IProgressMonitor.__init__(self)
            self.t0 = self.last = time.monotonic()
            self.steps: dict[str, int] = {}

        def phase_start(self, parent_phase, phase_name, num_steps):
            self.steps[phase_name] = num_steps
            emit(f"[trt] +{time.monotonic() - self.t0:6.1f} s  {phase_name} ({num_steps} steps)")

        def step_complete(self, phase_name, step):
            now = time.monotonic()
            if now - self.last >= every_s:
                self.last = now
                emit(f"[trt] +{now - self.t0:6.1f} s  {phase_name} {step + 1}/{self.steps.get(phase_name, '?')}")
            return True                                                 # False would cancel the build

        def phase_finish(self, phase_name):
            emit(f"[trt] +{time.monotonic() - self.t0:6.1f} s  {phase_name} done")

    return _Progress()


def quantize_fp8(onnx_in: Path, onnx_out: Path, calib: dict[str, np.ndarray]) -> Path:
    """FP8 Q/DQ nodes on the GEMMs via NVIDIA ModelOpt (TensorRT 11 has no FP8 builder flag)."""
    try:
        from modelopt.onnx.quantization import quantize
    except ImportError:
        raise BackendUnavailable("precision 'fp8' needs NVIDIA ModelOpt to insert FP8 Q/DQ nodes "
                                 "(pip install 'nvidia-modelopt[onnx]')") from None
    quantize(onnx_path=str(onnx_in), quantize_mode="fp8", calibration_data=calib, output_path=str(onnx_out),
             high_precision_dtype="fp16")
    return onnx_out


def build_engine(onnx_path: Path, engine_path: Path, shapes: dict, workspace_gb: float, level: int = 3,
                 progress: Callable[[str], None] = print) -> Path:
    """Parse `onnx_path`, build a strongly typed engine with one optimisation profile, write it atomically."""
    trt = require_tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    if hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"):   # opt-in on 10.x, always on in 11.x
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT could not parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_gb * (1 << 30)))
    config.builder_optimization_level = level
    profile = builder.create_optimization_profile()
    for name, (lo, opt, hi) in shapes.items():
        profile.set_shape(name, lo, opt, hi)
    config.add_optimization_profile(profile)
    config.progress_monitor = _monitor(trt, progress)
    progress(f"[trt] building {engine_path.name} from {onnx_path.name} (TensorRT {trt.__version__}) ...")
    t0 = time.monotonic()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"TensorRT engine build failed for {onnx_path} (see the TensorRT log above)")
    engine_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = engine_path.with_suffix(".tmp")
    tmp.write_bytes(bytes(serialized))
    tmp.replace(engine_path)
    progress(f"[trt] built {engine_path.name} in {time.monotonic() - t0:.0f} s ({engine_path.stat().st_size / 1e6:.0f} MB)")
    return engine_path


class TensorRTBackend(DiTBackend):
    """DiT engines at `precision`; head engines (with `head_graphs`) from the fp32 head graphs,
    whose GEMMs TensorRT runs as TF32 (the head's graphs are not exported in bf16)."""

    name = "tensorrt"

    def __init__(self, model, cfg: BackendConfig, progress: Callable[[str], None] = print,
                 checkpoint: str | None = None):
        trt = require_tensorrt()

        self.trt = trt
        self.cfg, self.mcfg = cfg, model.cfg
        graph_dtype = cfg.precision if cfg.precision in ("fp16", "bf16") else "fp32"
        onnx_dir = ensure_onnx(model, cfg, dtype=graph_dtype, progress=progress, checkpoint=checkpoint,
                               graphs=GRAPHS)
        manifest = json.loads((onnx_dir / "manifest.json").read_text())
        self.cache = Path(cfg.cache_dir).expanduser() / "engines"
        self.keys, self.engines, self.contexts = {}, {}, {}
        self.runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        shapes = profile_shapes(self.mcfg, cfg.max_batch)
        for g in GRAPHS:
            src = graph_path(onnx_dir, g, graph_dtype)
            onnx_sha = manifest["graphs"][src.stem]["sha256"]                # of the graph before any FP8 quantisation
            if cfg.precision == "fp8":
                calib = {k: v.numpy() for k, v in example_inputs(self.mcfg, batch=1).items()}
                src = quantize_fp8(src, onnx_dir / f"{g}_fp8.onnx", calib)
            key = EngineKey(torch.cuda.get_device_name(), trt.__version__, self.mcfg.name, manifest["weights_hash"],
                            cfg.precision, g, cfg.builder_level, cfg.max_batch, self.mcfg.solver.plan_latent_frames,
                            onnx_sha)
            self._load(g, key, src, shapes, progress)
        self.head_runtime, self._torch_head = "tensorrt", None
        if cfg.head_graphs:
            head_dir = ensure_head_onnx(model, cfg, progress=progress, checkpoint=checkpoint)
            hm = json.loads((head_dir / "manifest.json").read_text())
            for g, hshapes in head_profile_shapes(self.mcfg, cfg.max_batch).items():
                key = EngineKey(torch.cuda.get_device_name(), trt.__version__, self.mcfg.name, hm["head_weights_hash"],
                                "fp32", g, cfg.builder_level, cfg.max_batch, self.mcfg.solver.latent_frames,
                                hm["graphs"][g]["sha256"])
                self._load(g, key, graph_path(head_dir, g, "fp32"), hshapes, progress)
        else:
            self.head_runtime, self._torch_head = "torch", TorchBackend(model)

    def _load(self, graph: str, key: EngineKey, src: Path, shapes: dict, progress) -> None:
        path = self.cache / key.filename()
        if not path.is_file():
            build_engine(src, path, shapes, self.cfg.workspace_gb, self.cfg.builder_level, progress)
            path.with_suffix(".json").write_text(json.dumps(asdict(key), indent=2) + "\n")
        else:
            progress(f"[trt] cached engine {path}")
        engine = self.runtime.deserialize_cuda_engine(path.read_bytes())
        if engine is None:
            raise RuntimeError(f"TensorRT could not load {path}; delete it to rebuild")
        self.keys[graph], self.engines[graph] = key, engine
        self.contexts[graph] = engine.create_execution_context()

    def _run(self, graph: str, feed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Enqueue one engine on torch's current CUDA stream; outputs by name, on the inputs' device.

        CUDA inputs are bound as they are (no copy, no sync: later torch work on the stream is
        ordered after the engine); host inputs are copied up and the outputs copied back."""
        ctx, engine = self.contexts[graph], self.engines[graph]
        out_dev = next(iter(feed.values())).device
        feed = {k: v.to("cuda", torch.float32).contiguous() for k, v in feed.items()}
        for name, t in feed.items():
            ctx.set_input_shape(name, tuple(t.shape))
            ctx.set_tensor_address(name, t.data_ptr())
        outs = {}
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            if name in feed:
                continue
            dtype = _TORCH_DTYPE[engine.get_tensor_dtype(name).name]
            outs[name] = torch.empty(tuple(ctx.get_tensor_shape(name)), dtype=dtype, device="cuda")
            ctx.set_tensor_address(name, outs[name].data_ptr())
        stream = torch.cuda.current_stream()
        if not ctx.execute_async_v3(stream.cuda_stream):
            raise RuntimeError(f"TensorRT execution of {graph} failed")
        if out_dev.type != "cuda":
            return {k: v.to(out_dev) for k, v in outs.items()}             # the copy waits for the engine
        return outs

    def _dit(self, graph, x, mask, sigma_frames, text) -> torch.Tensor:
        return next(iter(self._run(graph, {"x": x, "mask": mask, "sigma_frames": sigma_frames, "text": text}).values()))

    def velocity(self, x, mask, sigma_frames, text):
        return self._dit("dit_velocity", x, mask, sigma_frames, text)    # [B, 16, T, h, w]

    def features(self, x, mask, sigma_frames, text):
        return self._dit("dit_features", x, mask, sigma_frames, text)    # [B, T, gh*gw, D]

    def head_prefix(self, feats, sigma_v, state) -> HeadCache:
        if self._torch_head is not None:
            return self._torch_head.head_prefix(feats, sigma_v, state)
        o = self._run("head_prefix", {"features": feats, "sigma_v": sigma_v, "state": state})
        return HeadCache(o["keys"], o["values"])                          # [layers, B, 1, Lp, hd] each

    def head_step(self, cache: HeadCache, actions, sigma_a) -> HeadOutput:
        if self._torch_head is not None:
            return self._torch_head.head_step(cache, actions, sigma_a)
        o = self._run("head_step", {"keys": cache.keys, "values": cache.values, "actions": actions, "sigma_a": sigma_a})
        return HeadOutput(o["velocity"], o["mass_v0"], o["mass_vplus"], o["attention"])

    def describe(self) -> dict:
        return {"backend": self.name, "head": self.head_runtime, "precision": self.cfg.precision,
                "engines": {g: k.filename() for g, k in self.keys.items()}}

    def close(self) -> None:
        self.contexts, self.engines = {}, {}


# TensorRT DataType name -> torch dtype of an engine output buffer
_TORCH_DTYPE = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "INT32": torch.int32,
                "INT64": torch.int64, "BOOL": torch.bool}
