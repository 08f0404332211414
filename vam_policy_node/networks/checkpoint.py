"""Checkpoints: safetensors weights with the preset (and normalisation stats) stored beside them.

`save_checkpoint(path, model, extra)` writes `path` (.safetensors) whose metadata holds the
model config as JSON plus any `extra` JSON (e.g. action/proprio statistics). Loading checks
every tensor's name and shape against the model built from the preset and names the first
mismatch; a missing file, a file that is not safetensors, or a preset that does not validate
raises a clear error before any weight is copied.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from vam_stack.config import ConfigError, from_dict, to_dict

from .config import ModelConfig

FORMAT = "vam_stack/v1"


class CheckpointError(ValueError):
    """The checkpoint cannot be used with this model; the message names the file and tensor."""


def save_checkpoint(path: str | Path, model: torch.nn.Module, cfg: ModelConfig, extra: dict | None = None) -> Path:
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "config": json.dumps(to_dict(cfg)), "extra": json.dumps(extra or {})}
    save_file(tensors, str(path), metadata=meta)
    return path


def read_metadata(path: str | Path) -> tuple[ModelConfig, dict[str, Any]]:
    """Config and extra metadata of a checkpoint, without loading tensors."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {str(path)!r}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except Exception as e:  # safetensors raises its own error types for corrupt headers
        raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: metadata format is {meta.get('format')!r}, expected {FORMAT!r}")
    try:
        cfg = from_dict(ModelConfig, json.loads(meta["config"]), f"{path} [config]")
        extra = json.loads(meta.get("extra", "{}"))
    except (KeyError, json.JSONDecodeError, ConfigError) as e:
        raise CheckpointError(f"{path}: bad stored config: {e}") from None
    return cfg, extra


def load_checkpoint(path: str | Path, model: torch.nn.Module) -> dict[str, Any]:
    """Copy weights into `model` after checking every name and shape; returns the extra metadata."""
    from safetensors.torch import load_file

    _, extra = read_metadata(path)
    state = load_file(str(path))
    expected = model.state_dict()
    for name, tensor in expected.items():
        if name not in state:
            raise CheckpointError(f"{path}: missing tensor {name!r} (expected shape {list(tensor.shape)})")
        if tuple(state[name].shape) != tuple(tensor.shape):
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {list(state[name].shape)}, the preset expects {list(tensor.shape)}"
            )
    unexpected = sorted(set(state) - set(expected))
    if unexpected:
        raise CheckpointError(f"{path}: unexpected tensor {unexpected[0]!r} ({len(unexpected)} in all)")
    for name, t in state.items():
        if not torch.isfinite(t).all():
            raise CheckpointError(f"{path}: tensor {name!r} contains NaN or inf")
    model.load_state_dict(state, strict=True)
    return extra
