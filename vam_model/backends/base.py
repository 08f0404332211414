"""The network backend interface, its config, and the parity measure every backend is held to.

A backend runs the two DiT calls the video rollout needs, with `VideoDiT`'s signature:
  velocity(x [B,16,T,h,w], mask [B,1,T,h,w], sigma_frames [B,T], text [B,L,text_dim])
      -> [B,16,T,h,w]
  features(same inputs) -> block-k output [B,T,gh*gw,D]
and the action head's two calls (see `vam_model/networks/head_io.py`):
  head_prefix(features [B,T,N,D], sigma_v [B], state [B,P]) -> HeadCache
  head_step(cache, actions [B,A,D_a], sigma_a [B]) -> HeadOutput (velocity, TR-layer masses, attention)
Inputs and outputs are fp32 torch tensors on the policy's device; outputs come back on the
device of the inputs. The tokenizer and the text projection stay in torch.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass

import torch

from vam_stack.config import check

BACKENDS = ("torch", "onnxruntime", "tensorrt")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8")

# Parity bounds against torch eager fp32, per backend precision: (min cosine, max |a - b|
# relative to max |reference|). fp32 graphs differ only by kernel order; fp16/bf16 by rounding
# of weights and activations through every block; fp8 by its 3-bit mantissa on the GEMMs.
PARITY_BOUNDS = {"fp32": (0.9999, 1e-3), "fp16": (0.999, 2e-2), "bf16": (0.999, 5e-2), "fp8": (0.99, 1.5e-1)}


class BackendUnavailable(RuntimeError):
    """The chosen backend cannot run on this machine (no CUDA, package missing); says what is needed."""


@dataclass(frozen=True)
class BackendConfig:
    name: str = "torch"               # torch | onnxruntime | tensorrt
    compile: bool = False             # torch: wrap velocity/features in torch.compile (first call compiles)
    onnx_dir: str | None = None       # onnxruntime/tensorrt: graphs from `vam-stack export onnx`; None = export on first use
    cache_dir: str = "~/.cache/vam_stack"  # exported graphs and TensorRT engines are cached here
    device: str = "auto"              # onnxruntime: cpu | cuda | auto (CUDA provider when the wheel has it)
    precision: str = "bf16"           # tensorrt: fp16 | bf16 (in the graph) | fp8 (Q/DQ via ModelOpt) | fp32
    threads: int = 0                  # onnxruntime intra-op threads (0 = ORT default: all cores)
    max_batch: int = 4                # tensorrt: optimisation-profile batch range 1..max_batch
    workspace_gb: float = 8.0         # tensorrt: builder workspace (tactic scratch memory), GiB
    builder_level: int = 3            # tensorrt: builder optimisation level 0-5 (TensorRT's default 3; lower builds faster)
    head_graphs: bool = True          # onnxruntime/tensorrt: the head's exported graphs run in the backend too (false: torch head)

    def __post_init__(self):
        check(self.name in BACKENDS, f"backend.name must be one of {BACKENDS}, got {self.name!r}")
        check(self.device in ("auto", "cpu", "cuda"), f"backend.device must be auto, cpu or cuda, got {self.device!r}")
        check(self.precision in PRECISIONS, f"backend.precision must be one of {PRECISIONS}, got {self.precision!r}")
        check(self.threads >= 0, f"backend.threads must be >= 0, got {self.threads!r}")
        check(1 <= self.max_batch <= 64, f"backend.max_batch must be in [1, 64], got {self.max_batch!r}")
        check(0 <= self.builder_level <= 5, f"backend.builder_level must be in [0, 5], got {self.builder_level!r}")
        check(self.workspace_gb > 0, f"backend.workspace_gb must be > 0, got {self.workspace_gb!r}")
        check(not (self.compile and self.name != "torch"),
              f"backend.compile applies to the torch backend only, got name={self.name!r}")


class DiTBackend(abc.ABC):
    """velocity / features of the video DiT and the head's prefix / step; a context manager
    releasing sessions and engines on exit."""

    name: str = "?"
    head_runtime: str = "?"   # what runs the action head: torch (eager) or the backend's own graphs

    @abc.abstractmethod
    def velocity(self, x: torch.Tensor, mask: torch.Tensor, sigma_frames: torch.Tensor,
                 text: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def features(self, x: torch.Tensor, mask: torch.Tensor, sigma_frames: torch.Tensor,
                 text: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def head_prefix(self, feats: torch.Tensor, sigma_v: torch.Tensor, state: torch.Tensor): ...

    @abc.abstractmethod
    def head_step(self, cache, actions: torch.Tensor, sigma_a: torch.Tensor): ...

    def describe(self) -> dict:
        """What runs where (for benchmark JSON and logs)."""
        return {"backend": self.name, "head": self.head_runtime}

    def close(self) -> None:
        """Release sessions, engines and device memory; idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def parity(out: torch.Tensor, ref: torch.Tensor) -> dict:
    """Cosine similarity and max absolute error (absolute and relative to max |ref|) of two tensors."""
    if out.shape != ref.shape:
        raise ValueError(f"parity: shapes differ, {list(out.shape)} vs reference {list(ref.shape)}")
    a, b = out.detach().double().flatten().cpu(), ref.detach().double().flatten().cpu()
    cos = float(torch.nn.functional.cosine_similarity(a, b, dim=0))
    err = float((a - b).abs().max())
    scale = float(b.abs().max()) or 1.0
    return {"cosine": cos, "max_abs": err, "max_rel": err / scale}


def within_bounds(p: dict, precision: str) -> bool:
    cos_min, rel_max = PARITY_BOUNDS[precision]
    return p["cosine"] >= cos_min and p["max_rel"] <= rel_max
