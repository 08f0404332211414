"""Checkpoints: safetensors weights with the preset (and normalisation stats) stored beside them.

`save_checkpoint(path, model, cfg, extra)` writes `path` (.safetensors) whose metadata holds the
model config as JSON, any `extra` JSON (e.g. action/proprio statistics, the text encoder) and two
integrity hashes: `tensor_sha256` over the tensors (`tensor_digest`: SHA-256 over every tensor's
name, dtype, shape and raw bytes, in name order) and `checkpoint_sha256` over that and every other
metadata field (`checkpoint_digest`): an edit of the stored config, the normalisation statistics
or the text-encoder path changes behaviour as surely as an edited weight, and is refused too.

Loading refuses, with the file named:
  - a missing file, a file that is not safetensors, a stored config that does not validate;
  - a stored config that claims a registered preset name (models/<name>.yaml) but whose robot
    geometry (action type and size, proprio size, cameras, chunk, rates) differs from it: a
    LIBERO-trained checkpoint relabelled as the robot preset is not that preset;
  - a tensor missing, unexpected or of the wrong shape for the model;
  - tensor bytes that no longer match `tensor_sha256`, metadata that no longer matches
    `checkpoint_sha256` (changed after saving), or either hash missing;
  - a tensor whose dtype is not the model's (weights cast to int8 would load as zeros);
  - NaN or inf in any tensor.

A checkpoint written before the hash existed is refused until someone who trusts it adds the
hash (the tensors are not touched, only the metadata is rewritten):

    vam-stack checkpoint add-hash FILE.safetensors [...]
    vam-stack checkpoint verify FILE.safetensors [...]

`check_preset` compares a checkpoint's stored config with the preset a caller asked for.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from vam_stack.config import ConfigError, from_dict, to_dict
from vam_stack.paths import models_dir

from .config import ModelConfig, RobotConfig, known_presets, load_config

FORMAT = "vam_stack/v1"
HASH_KEY = "tensor_sha256"   # metadata key of the tensor integrity hash
FULL_HASH_KEY = "checkpoint_sha256"   # metadata key of the hash over the tensor hash and every other field
HASH_KEYS = (HASH_KEY, FULL_HASH_KEY)
ADD_HASH_COMMAND = "vam-stack checkpoint add-hash"


class CheckpointError(ValueError):
    """The checkpoint cannot be used with this model; the message names the file and tensor."""


# ---- integrity hash ---------------------------------------------------------------------------
def resolve_checkpoint(checkpoint: str | os.PathLike | None, preset: str | None,
                       default_preset: str) -> tuple[str | None, str | None]:
    """(checkpoint, preset) as every entry point resolves them: a given checkpoint is used as is
    (preset None then means "the checkpoint's own"); without one, the preset (default
    `default_preset`) and its shipped weights models/<preset>.safetensors if present, else None
    (seeded random weights)."""
    if checkpoint:
        return str(checkpoint), preset

    preset = preset or default_preset
    shipped = models_dir() / f"{preset}.safetensors"
    return (str(shipped) if shipped.is_file() else None), preset


def tensor_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 (hex) over the tensors in name order: for each, a JSON line
    `[name, dtype, shape, nbytes]` and then its raw bytes (C order, native = little endian)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.reshape(-1).view(torch.uint8)                            # [nbytes] the same memory, as bytes
        h.update((json.dumps([name, str(t.dtype), list(t.shape), raw.numel()]) + "\n").encode())
        h.update(raw.numpy().data)
    return h.hexdigest()


def checkpoint_digest(tensor_hash: str, meta: Mapping[str, str]) -> str:
    """SHA-256 (hex) over the tensor hash and every other metadata field (key and value, in key
    order): what the file says besides its weights (config, statistics, text encoder) is covered."""
    h = hashlib.sha256()
    h.update((json.dumps([HASH_KEY, tensor_hash]) + "\n").encode())
    for key in sorted(k for k in meta if k not in HASH_KEYS):
        h.update((json.dumps([key, meta[key]]) + "\n").encode())
    return h.hexdigest()


def _require_hash(path: Path, meta: dict[str, str]) -> None:
    missing = [k for k in HASH_KEYS if not meta.get(k)]
    if missing:
        raise CheckpointError(
            f"{path}: no integrity hash ({', '.join(map(repr, missing))}) in the metadata, so changed or "
            f"corrupted tensors or metadata cannot be detected; if you trust this file (e.g. you trained it "
            f"with an older version), add the hash with `{ADD_HASH_COMMAND} {path}`")


def _check_digest(path: Path, meta: dict[str, str], state: Mapping[str, torch.Tensor]) -> str:
    """The tensors' hash, after checking it and the whole-checkpoint hash equal the stored ones."""
    _require_hash(path, meta)
    stored, actual = meta[HASH_KEY], tensor_digest(state)
    if actual != stored:
        raise CheckpointError(
            f"{path}: tensor data does not match the checkpoint's integrity hash (stored {HASH_KEY} "
            f"{stored[:12]}..., the tensors hash to {actual[:12]}...): the file was changed after it was "
            f"saved; refusing to load it")
    full = checkpoint_digest(actual, meta)
    if full != meta[FULL_HASH_KEY]:
        fields = sorted(k for k in meta if k not in HASH_KEYS)
        raise CheckpointError(
            f"{path}: metadata does not match the checkpoint's integrity hash (stored {FULL_HASH_KEY} "
            f"{meta[FULL_HASH_KEY][:12]}..., the metadata hashes to {full[:12]}...): one of {fields} (the "
            f"stored config, normalisation statistics or text encoder) was changed after saving; refusing it")
    return actual


# ---- stored config ----------------------------------------------------------------------------
def _read_header(path: Path) -> dict[str, str]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {str(path)!r}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except Exception as e:  # safetensors raises its own error types for corrupt headers
        raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: metadata format is {meta.get('format')!r}, expected {FORMAT!r}")
    return meta


def robot_differences(got: RobotConfig, want: RobotConfig) -> list[str]:
    """'<field> <got> vs <want>' for every robot-geometry field that differs."""
    out = []
    for f in dataclasses.fields(RobotConfig):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if a != b:
            out.append(f"{f.name} {a!r} vs {b!r}")
    return out


def _check_registered(path: Path, cfg: ModelConfig) -> None:
    """A stored config named like a registered preset must have that preset's robot geometry."""
    if cfg.name not in known_presets():
        return
    diffs = robot_differences(cfg.robot, load_config(cfg.name).robot)
    if diffs:
        raise CheckpointError(
            f"{path}: the stored config calls itself preset {cfg.name!r} but its robot geometry differs from "
            f"models/{cfg.name}.yaml (checkpoint vs preset): {'; '.join(diffs)}; a checkpoint trained for "
            f"another robot is refused under a registered preset's name")


def _parse(path: Path) -> tuple[ModelConfig, dict[str, Any], dict[str, str]]:
    """(stored config, extra, raw metadata), checked as `read_metadata` describes."""
    meta = _read_header(path)
    try:
        cfg = from_dict(ModelConfig, json.loads(meta["config"]), f"{path} [config]")
        extra = json.loads(meta.get("extra", "{}"))
    except (KeyError, json.JSONDecodeError, ConfigError) as e:
        raise CheckpointError(f"{path}: bad stored config: {e}") from None
    _check_registered(path, cfg)
    return cfg, extra, meta


def read_metadata(path: str | Path) -> tuple[ModelConfig, dict[str, Any]]:
    """Config and extra metadata of a checkpoint, without loading tensors (the integrity hash is
    checked by `load_checkpoint` and `verify_checkpoint`, which read the tensors)."""
    cfg, extra, _ = _parse(Path(path))
    return cfg, extra


def _describe(cfg: ModelConfig) -> str:
    r = cfg.robot
    return (f"{r.action_type}, {r.action_dim}-dim actions, {r.proprio_dim}-dim proprio, chunk {r.chunk}, "
            f"{len(r.cameras)} view(s) {r.camera_width}x{r.camera_height}")


def check_preset(path: str | Path, stored: ModelConfig, asked: ModelConfig, asked_label: str | None = None) -> None:
    """Refuse a checkpoint whose stored config is not the preset the caller asked for: a
    different preset name, or the same name with a different robot geometry."""
    label = asked_label if asked_label is not None else asked.name
    fix = f"pass --preset {stored.name} or leave --preset out to use the checkpoint's own preset"
    if stored.name != asked.name:
        raise CheckpointError(
            f"{path}: the checkpoint is preset {stored.name!r} ({_describe(stored)}) but preset {label!r} "
            f"({_describe(asked)}) was asked for; {fix}")
    diffs = robot_differences(stored.robot, asked.robot)
    if diffs:
        raise CheckpointError(
            f"{path}: the checkpoint's preset {stored.name!r} and the asked-for {label!r} differ in robot geometry "
            f"(checkpoint vs asked): {'; '.join(diffs)}; {fix}")


# ---- save / load ------------------------------------------------------------------------------
def save_checkpoint(path: str | Path, model: torch.nn.Module, cfg: ModelConfig, extra: dict | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "config": json.dumps(to_dict(cfg)), "extra": json.dumps(extra or {}),
            HASH_KEY: tensor_digest(tensors)}
    meta[FULL_HASH_KEY] = checkpoint_digest(meta[HASH_KEY], meta)
    save_file(tensors, str(path), metadata=meta)
    return path


def load_checkpoint(path: str | Path, model: torch.nn.Module) -> dict[str, Any]:
    """Copy weights into `model` after checking every name and shape, the integrity hash and
    finiteness; returns the extra metadata."""
    path = Path(path)
    _, extra, meta = _parse(path)
    _require_hash(path, meta)                                            # before reading any tensor
    state = load_file(str(path))
    expected = model.state_dict()
    for name, tensor in expected.items():
        if name not in state:
            raise CheckpointError(f"{path}: missing tensor {name!r} (expected shape {list(tensor.shape)})")
        if tuple(state[name].shape) != tuple(tensor.shape):
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {list(state[name].shape)}, the preset expects {list(tensor.shape)}"
            )
        if state[name].dtype != tensor.dtype:      # load_state_dict would cast silently (int8 -> zeros)
            raise CheckpointError(f"{path}: tensor {name!r} is {state[name].dtype}, the model's is {tensor.dtype}")
    unexpected = sorted(set(state) - set(expected))
    if unexpected:
        raise CheckpointError(f"{path}: unexpected tensor {unexpected[0]!r} ({len(unexpected)} in all)")
    _check_digest(path, meta, state)
    for name, t in state.items():
        if not torch.isfinite(t).all():
            raise CheckpointError(f"{path}: tensor {name!r} contains NaN or inf")
    model.load_state_dict(state, strict=True)
    return extra


def verify_checkpoint(path: str | Path) -> str:
    """The checkpoint's hash after checking its metadata and that its tensors match the hash."""
    path = Path(path)
    _, _, meta = _parse(path)
    _require_hash(path, meta)
    return _check_digest(path, meta, load_file(str(path)))


def add_hash(path: str | Path, force: bool = False) -> tuple[str, bool]:
    """Add `tensor_sha256` to a checkpoint you trust; returns (hash, whether the file was rewritten).

    Only the metadata changes: every existing key is kept, the tensors are written back unchanged
    and checked bit for bit against the original before the file is replaced (atomically). A file
    whose hash is already right is left alone; one whose stored hash does not match its tensors is
    refused unless `force` (you trust the tensors as they are now)."""
    path = Path(path)
    _, _, meta = _parse(path)                                            # format, config, registered preset
    state = load_file(str(path))
    digest = tensor_digest(state)
    full = checkpoint_digest(digest, meta)
    stored, stored_full = meta.get(HASH_KEY), meta.get(FULL_HASH_KEY)
    if stored == digest and stored_full == full:
        return digest, False
    if stored and stored != digest and not force:
        raise CheckpointError(
            f"{path}: stored {HASH_KEY} {stored[:12]}... does not match the tensors ({digest[:12]}...): they "
            f"changed after saving; re-hash with --force only if you trust the tensors as they are now")
    if stored_full and stored_full != full and not force:
        raise CheckpointError(
            f"{path}: stored {FULL_HASH_KEY} {stored_full[:12]}... does not match the metadata ({full[:12]}...): "
            f"the config, statistics or text encoder changed after saving; re-hash with --force only if you "
            f"trust the metadata as it is now")
    new_meta = {**meta, HASH_KEY: digest, FULL_HASH_KEY: full}
    tmp = path.with_name(path.name + ".hash.tmp")
    try:
        save_file(state, str(tmp), metadata=new_meta)
        again = load_file(str(tmp))
        same = set(again) == set(state) and all(
            again[k].dtype == state[k].dtype and again[k].shape == state[k].shape
            and torch.equal(again[k].reshape(-1).view(torch.uint8), state[k].reshape(-1).view(torch.uint8))
            for k in state)
        if not same or tensor_digest(again) != digest or _read_header(tmp) != new_meta:
            raise CheckpointError(f"{path}: rewritten file does not round-trip; the original is left unchanged")
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return digest, True
