"""Where the policy's tensors live: device names, and the host <-> device copies of one replan.

    auto     CUDA when torch sees a GPU, else the CPU
    cpu      the CPU
    cuda     the current CUDA device; cuda:N a given one (an error naming what torch sees when absent)
    meta     no data: every tensor carries shape and device only. Used to check the plumbing on a
             machine without a GPU: a tensor left on the host, or a hidden host read (`.item()`,
             `float()`, `.numpy()`), is an error on meta just as it would be a copy or a sync on CUDA.

Uploads go through pinned host memory on CUDA (`non_blocking` copies that overlap with queued
work); on the CPU they are the arrays themselves (no copy).
"""
from __future__ import annotations

import re

import numpy as np
import torch

DEVICE_NAMES = ("auto", "cpu", "cuda", "cuda:N", "meta")
_PATTERN = re.compile(r"^(auto|cpu|meta|cuda(:\d+)?)$")


class DeviceUnavailable(RuntimeError):
    """The configured device does not exist on this machine; says what torch sees."""


def check_device_name(name) -> None:
    if not isinstance(name, str) or not _PATTERN.match(name):
        raise ValueError(f"policy.device must be one of {', '.join(DEVICE_NAMES)}, got {name!r}")


def resolve_device(name: str) -> torch.device:
    """The torch device `name` means here; refuses a CUDA device this machine does not have."""
    check_device_name(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailable(
                f"policy.device {name!r}: torch {torch.__version__} sees no CUDA GPU here "
                f"(built for CUDA {torch.version.cuda}); use device 'cpu' or 'auto'")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise DeviceUnavailable(f"policy.device {name!r}: this machine has {count} CUDA device(s) (0..{count - 1})")
    return dev


def upload(value, device: torch.device) -> torch.Tensor:
    """A host array/tensor on `device`: pinned + non_blocking on CUDA, the same memory on the CPU."""
    t = torch.from_numpy(np.ascontiguousarray(value)) if isinstance(value, np.ndarray) else value
    if t.device == device:
        return t
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def read_scalar(t: torch.Tensor) -> float:
    """The one kind of mid-replan host read: a scalar the next step's control flow depends on (TR)."""
    return float(t.reshape(-1)[0])


def to_host(*tensors: torch.Tensor) -> list[np.ndarray]:
    """Device tensors -> host arrays at the end of a replan (the first copy waits for the device)."""
    return [t.detach().float().cpu().numpy() for t in tensors]
