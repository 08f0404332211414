"""Reading weight files for the foundation import (foundation.py, pi0_head.py): safetensors, or a
torch pickle read with weights_only unless its source is trusted; FoundationError names the file."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file


class FoundationError(ValueError):
    """A foundation file cannot go into the preset; the message names the file and the keys."""


def load_safetensors(path: Path) -> dict:
    """A .safetensors file's tensors, or FoundationError naming the file (truncated, a header that
    claims 2**62 bytes, not safetensors at all)."""
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise FoundationError(f"{path}: not a readable safetensors file ({str(e).splitlines()[0][:200]})") from None


def _load_error(e: BaseException) -> str:
    """torch.load's reason in one short line: the weights-only unpickler's own finding (e.g.
    "Trying to load unsupported GLOBAL posix.system ...", "Unsupported operand 149"), without its
    advice paragraphs."""
    boiler = ("Weights only load failed", "Please file an issue", "Check the documentation")
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.strip().startswith(boiler)]
    return (lines[0] if lines else str(e).splitlines()[0] if str(e) else type(e).__name__)[:200]


def read_tensor_file(path: str | Path, trust_pickle: bool = False) -> dict:
    """A `.safetensors` file, or a torch pickle (`.pt`/`.pth`) read with weights_only unless trusted."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {str(path)!r}")
    if path.suffix == ".safetensors":
        return load_safetensors(path)

    def load(mmap: bool):
        with warnings.catch_warnings():          # "Detected pickle protocol 4 ...": the refusal says it all
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(str(path), map_location="cpu", weights_only=not trust_pickle, mmap=mmap)

    try:
        try:
            raw = load(True)
        except RuntimeError as e:   # mmap needs the zip format; an old-format pickle loads without it
            if "mmap" not in str(e):
                raise FoundationError(f"{path}: not a readable torch checkpoint ({str(e).splitlines()[0]})") from None
            raw = load(False)
    except FoundationError:
        raise
    except Exception as e:     # weights_only refuses objects it cannot prove harmless; or not a checkpoint at all
        first = _load_error(e)
        if trust_pickle or "Weights only load failed" not in str(e):
            raise FoundationError(f"{path}: not a readable torch checkpoint ({type(e).__name__}: {first})") from None
        raise FoundationError(
            f"{path}: the pickle holds objects beyond tensors, or is no torch checkpoint ({first}); loading it "
            f"runs code from the file, so it is refused unless you trust its source: pass --trust-pickle") from None
    if not isinstance(raw, Mapping):
        raise FoundationError(f"{path}: holds a {type(raw).__name__}, not a state dict of tensors")
    return raw
