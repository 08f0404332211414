"""`vam-stack export onnx`: the DiT feature extractor (and optionally the action head) as ONNX.

Graphs written to `--out DIR`, with `manifest.json` describing them:
  dit_velocity.onnx  (x [B,16,T,h,w], mask [B,1,T,h,w], sigma_frames [B,T], text [B,L,text_dim])
                     -> velocity [B,16,T,h,w]: the full forward of every solver step before
                     the exposed one.
  dit_features.onnx  same inputs -> features [B,T,gh*gw,D]: blocks 1..k only (the exposed step).
  head_prefix.onnx   (features [B,T,N,D], sigma_v [B], state [B,P]) -> keys, values
                     [layers,B,1,Lp,hd]: the per-layer prefix KV cache.
  head_step.onnx     (keys, values, actions [B,A,action_dim], sigma_a [B]) -> velocity
                     [B,A,action_dim], mass_v0 [B], mass_vplus [B], attention [B,A,Tv]: one Euler
                     evaluation with the TR layer's head-averaged attention masses on V0 / V+ (and
                     its head-averaged attention over the video tokens, the monitor's overlay) as
                     explicit outputs, so the Temporal Ratio survives fused attention elsewhere.
                     The head graphs are fp32 (the `--dtype` applies to the DiT graphs).

Anchor conditioning inside the DiT graphs: the mask channel concat, the padding-mask channel
and the per-frame time embedding (the near-zero anchor sigma comes in through
`sigma_frames`) are all in the graph; the anchor blend before/after each call (three
element-wise lines of the solver) stays in the solver, which is shared by every backend.

Dynamic axes: batch (`batch`, 1..64) on every input, latent frames (`frames`, 2..T') on the
DiT graphs so one graph serves the T-frame and the T'-frame (plan) rollouts.

Exporter: torch's dynamo exporter (`torch.export` strict mode, then `torch.onnx.export` of the
ExportedProgram; needs the `onnxscript` package). The legacy TorchScript exporter bakes the
batch size into the RoPE reshape of diffusers' attention processor, so dynamic batch fails
there. Opset 18 (OPSET below): the dynamo exporter's native opset; ONNX Runtime >= 1.14 and
TensorRT >= 8.6 parse it.

Precision: `--dtype fp16|bf16` exports the DiT graphs with weights and compute in that dtype
(inputs and outputs stay fp32, cast at the graph edges). TensorRT 11 builds strongly typed
networks only (the FP16/BF16 builder flags are gone), so reduced precision has to be in the
graph; these are the graphs the `tensorrt` backend builds engines from.
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import time
import warnings
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn

from vam_stack.config import to_dict

from .networks.checkpoint import check_preset, load_checkpoint, read_metadata
from .networks.config import ModelConfig, load_config
from .networks.model import VideoActionModel
from .networks.head_io import prefix_kv, step_outputs

OPSET = 18            # dynamo exporter's native opset; ORT >= 1.14, TensorRT >= 8.6
MAX_BATCH = 64        # upper bound of the dynamic batch axis (TensorRT profiles need one)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
DIT_INPUTS = ("x", "mask", "sigma_frames", "text")
LARGE_MODEL_BYTES = 1_500_000_000  # above this, weights go to external data (protobuf limit is 2 GB)


class ExportError(RuntimeError):
    """The model cannot be exported (missing exporter package, bad option)."""


# ---- graph wrappers ---------------------------------------------------------------------------
class _DiTGraph(nn.Module):
    """VideoDiT velocity or block-k features with fp32 I/O and `dtype` compute inside."""

    def __init__(self, dit: nn.Module, what: str, dtype: torch.dtype):
        super().__init__()
        self.dit, self.what, self.dtype = dit, what, dtype

    def forward(self, x, mask, sigma_frames, text):
        d = self.dtype
        args = (x.to(d), mask.to(d), sigma_frames.to(d), text.to(d))
        if self.what == "velocity":
            out = self.dit.velocity(*args)                               # [B, 16, T, h, w]
        else:
            out = self.dit.features(*args)                               # [B, T, gh*gw, D]
        return out.float()


class HeadPrefixGraph(nn.Module):
    """(features, sigma_v, state) -> per-layer prefix keys and values, stacked over layers."""

    def __init__(self, head: nn.Module, grid: tuple[int, int]):
        super().__init__()
        self.head, self.grid = head, grid

    def forward(self, feats, sigma_v, state):
        return prefix_kv(self.head, self.grid, feats, sigma_v, state)    # [layers, B, 1, Lp, hd] x 2


class HeadStepGraph(nn.Module):
    """One cached Euler evaluation, with the TR layer's attention masses on V0 and V+ and its
    head-averaged attention over the video tokens (the monitor's overlay)."""

    def __init__(self, head: nn.Module, tr_layer: int, tokens_per_frame: int, video_tokens: int):
        super().__init__()
        self.head, self.tr_layer = head, tr_layer
        self.tpf, self.tv = tokens_per_frame, video_tokens

    def forward(self, keys, values, actions, sigma_a):
        return step_outputs(self.head, keys, values, actions, sigma_a, self.tr_layer, self.tpf, self.tv)


# ---- fingerprints -----------------------------------------------------------------------------
def weights_hash(module: nn.Module) -> str:
    """sha256 (16 hex) over parameter/buffer names, shapes, dtypes and bytes: the checkpoint identity."""
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        t = t.detach().contiguous().cpu()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def config_hash(cfg: ModelConfig) -> str:
    """sha256 (16 hex) of the whole model config: what a graph bakes in beyond its weights (the feature
    block k, the TR layer, rope scales, head counts at equal width). Two models with the same weights
    but another config get other graphs."""
    return hashlib.sha256(json.dumps(to_dict(cfg), sort_keys=True).encode()).hexdigest()[:16]


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


# ---- export -----------------------------------------------------------------------------------
def example_inputs(cfg: ModelConfig, batch: int = 2, frames: int | None = None) -> dict[str, torch.Tensor]:
    """Deterministic DiT inputs of the preset's geometry (anchor mask at frame 0, anchor sigma)."""
    g = torch.Generator().manual_seed(0)
    t = cfg.solver.latent_frames if frames is None else frames
    h, w = cfg.latent_hw
    x = torch.randn(batch, cfg.tokenizer.latent_channels, t, h, w, generator=g)  # [B, 16, T, h, w]
    mask = torch.zeros(batch, 1, t, h, w)
    mask[:, :, 0] = 1.0                                                  # [B, 1, T, h, w]
    sigma = torch.full((batch, t), 0.883)
    sigma[:, 0] = cfg.dit.anchor_time_sigma or 0.883                     # [B, T]
    text = torch.randn(batch, cfg.dit.text_tokens, cfg.dit.text_dim, generator=g)  # [B, L, text_dim]
    return {"x": x, "mask": mask, "sigma_frames": sigma, "text": text}


def _export(module: nn.Module, args: tuple, dynamic: tuple, path: Path, inputs: list[str], outputs: list[str],
            with_weights: bool) -> None:
    try:
        import onnxscript  # noqa: F401  (torch's dynamo exporter needs it)
    except ImportError:
        raise ExportError("ONNX export needs the 'onnxscript' package (pip install onnxscript)") from None
    # torch.export first: under torch.onnx.export's own tracing, diffusers' attention
    # processor sees is_in_onnx_export() and turns head counts into tensors (data-dependent repeats).
    with _quiet_exporter():
        ep = torch.export.export(module, args, dynamic_shapes=dynamic, strict=False)
        size = sum(p.numel() * p.element_size() for p in module.parameters())
        torch.onnx.export(ep, args, str(path), dynamo=True, opset_version=OPSET, input_names=inputs,
                          output_names=outputs, export_params=with_weights,
                          external_data=with_weights and size > LARGE_MODEL_BYTES, verbose=False,
                          optimize=with_weights)  # constant folding reads weights: none without them
    _name_dims(path, args, dynamic)


@contextlib.contextmanager
def _quiet_exporter():
    """Without the exporter's noise on every graph: "torchvision is not installed. Skipping
    torchvision::nms" (4 lines; no torchvision op is exported here) and torch's own FutureWarning
    about `LeafSpec` from inside torch.export. Real warnings and errors still show."""
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
            yield
    finally:
        registration.setLevel(level)


def _name_dims(path: Path, args: tuple, dynamic: tuple) -> None:
    """Give the exporter's symbolic dims (s31, ...) their Dim names (batch, frames) in the saved graph."""
    import onnx    # optional (the export extra)

    model = onnx.load(str(path), load_external_data=False)
    rename = {}
    for inp, spec in zip(model.graph.input, dynamic):
        dims = inp.type.tensor_type.shape.dim
        for axis, d in spec.items():
            if dims[axis].dim_param:
                rename[dims[axis].dim_param] = d.__name__
    for vi in (*model.graph.input, *model.graph.output, *model.graph.value_info):
        for dim in vi.type.tensor_type.shape.dim:
            if dim.dim_param in rename:
                dim.dim_param = rename[dim.dim_param]
    onnx.save(model, str(path))


def export_onnx(model: VideoActionModel, out_dir: str | Path, dtype: str = "fp32", head: bool = True,
                with_weights: bool = True, checkpoint: str | None = None, dit: bool = True,
                progress: Callable[[str], None] = print) -> dict:
    """Write the graphs and `manifest.json` into `out_dir`; returns the manifest.

    `with_weights=False` writes the graph structure only (the model may then live on the meta
    device): enough to check that a 2 B preset exports, without 8 GB of weights.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = manifest_header(model, dtype, with_weights, checkpoint, head)
    for name, job in graph_jobs(model, dtype, dit=dit, head=head).items():
        progress(f"[export] {model.cfg.name}: {name} ...")
        entry = export_graph(job, out / f"{name}.onnx", with_weights)
        manifest["graphs"][name] = entry
        progress(f"[export] {model.cfg.name}: {name} done in {entry['export_s']:.1f} s ({entry['bytes'] / 1e6:.1f} MB)")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def manifest_header(model: VideoActionModel, dtype: str, with_weights: bool = True, checkpoint: str | None = None,
                    head: bool = True) -> dict:
    """What a manifest says about the graphs' source (preset, weights and config hashes, dtype); its
    `graphs` ({} here) gets one entry per exported graph (`export_graph`)."""
    if dtype not in DTYPES:
        raise ExportError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    cfg = model.cfg
    on_meta = next(model.parameters()).device.type == "meta"
    if on_meta and with_weights:
        raise ExportError("a model on the meta device has no weights: export it with with_weights=False")
    return {
        "preset": cfg.name, "opset": OPSET, "dtype": dtype, "torch": torch.__version__,
        "weights": "none (graph only)" if not with_weights else (checkpoint or "random"),
        "weights_hash": None if on_meta else weights_hash(model.dit),
        "head_weights_hash": None if on_meta or not head else weights_hash(model.head),
        "config_hash": config_hash(cfg), "feature_block": cfg.dit.feature_block, "max_batch": MAX_BATCH,
        "max_frames": cfg.solver.plan_latent_frames, "graphs": {},
    }


def graph_jobs(model: VideoActionModel, dtype: str = "fp32", dit: bool = True, head: bool = True) -> dict:
    """name -> (module, example args, dynamic shapes, input names, output names) of each graph."""
    if dtype not in DTYPES:
        raise ExportError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    cfg = model.cfg
    dev = next(model.parameters()).device
    suffix = "" if dtype == "fp32" else f"_{dtype}"
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    frames = torch.export.Dim("frames", min=2, max=cfg.solver.plan_latent_frames)
    ex = {k: v.to(dev) for k, v in example_inputs(cfg).items()}
    dit_args = tuple(ex[k] for k in DIT_INPUTS)
    dit_dyn = ({0: batch, 2: frames}, {0: batch, 2: frames}, {0: batch, 1: frames}, {0: batch})
    jobs = []
    if dit:
        net = model.dit if dtype == "fp32" else copy.deepcopy(model.dit).to(DTYPES[dtype])  # keep fp32 weights intact
        jobs += [(f"dit_velocity{suffix}", _DiTGraph(net, "velocity", DTYPES[dtype]), dit_args, dit_dyn,
                  list(DIT_INPUTS), ["velocity"]),
                 (f"dit_features{suffix}", _DiTGraph(net, "features", DTYPES[dtype]), dit_args, dit_dyn,
                  list(DIT_INPUTS), ["features"])]
    if head:
        jobs += _head_jobs(model, batch, dev)
    return {name: rest for name, *rest in jobs}


def export_graph(job: tuple, path: Path, with_weights: bool = True) -> dict:
    """Export one `graph_jobs` entry to `path`; returns its manifest entry (file, inputs, outputs,
    export_s, bytes, sha256 prefix; data_bytes where the weights went to external data)."""
    module, args, dyn, ins, outs = job
    t0 = time.perf_counter()
    with torch.no_grad():
        _export(module.eval(), args, dyn, path, ins, outs, with_weights)
    entry = {"file": path.name, "inputs": ins, "outputs": outs, "export_s": round(time.perf_counter() - t0, 2),
             "bytes": path.stat().st_size, "sha256": file_sha256(path)[:16]}
    data = path.with_name(path.name + ".data")
    if data.is_file():
        entry["data_bytes"] = data.stat().st_size
    return entry


def _head_jobs(model: VideoActionModel, batch, dev) -> list:
    cfg, h = model.cfg, model.cfg.head
    b = 2
    feats = torch.randn(b, cfg.solver.latent_frames, cfg.dit_tokens_per_frame, cfg.dit.width, device=dev)
    sigma_v = torch.full((b,), 0.883, device=dev)
    state = torch.zeros(b, cfg.robot.proprio_dim, device=dev)
    lp = cfg.head_video_tokens + 1
    kv = torch.zeros(h.layers, b, h.kv_heads, lp, h.head_dim, device=dev)
    actions = torch.zeros(b, cfg.robot.chunk, cfg.robot.action_dim, device=dev)
    sigma_a = torch.ones(b, device=dev)
    prefix = HeadPrefixGraph(model.head, cfg.dit_grid)
    step = HeadStepGraph(model.head, h.tr_layer, cfg.head_tokens_per_frame, cfg.head_video_tokens)
    return [("head_prefix", prefix, (feats, sigma_v, state), ({0: batch}, {0: batch}, {0: batch}),
             ["features", "sigma_v", "state"], ["keys", "values"]),
            ("head_step", step, (kv, kv.clone(), actions, sigma_a), ({1: batch}, {1: batch}, {0: batch}, {0: batch}),
             ["keys", "values", "actions", "sigma_a"], ["velocity", "mass_v0", "mass_vplus", "attention"])]


def load_model(preset: str, checkpoint: str | None = None, seed: int = 0, meta: bool = False,
               device: str = "cpu") -> VideoActionModel:
    """The preset's model with checkpoint weights, seeded random weights, or none (meta device).

    `device="cuda"` initialises the random weights on the GPU (seconds instead of a minute for 2 B).
    """
    if checkpoint:
        cfg = read_metadata(checkpoint)[0]
        if preset is not None:              # a preset given beside a checkpoint must be the checkpoint's
            check_preset(checkpoint, cfg, load_config(preset), str(preset))
    else:
        cfg = load_config(preset or "tiny")
    if meta:
        with torch.device("meta"):
            return VideoActionModel(cfg).eval()
    torch.manual_seed(seed)
    with torch.device(device):
        model = VideoActionModel(cfg).eval()
    if checkpoint:
        load_checkpoint(checkpoint, model)
    return model
