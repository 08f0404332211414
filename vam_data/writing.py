"""Imported episodes -> a dataset of this project (`vam_data.dataset`'s format) at a contract's geometry.

Everything is written into `<out>.partial` and renamed to `<out>` once the last episode and the
meta files are on disk: an import that fails half-way leaves no dataset that looks complete.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from .contract import ContractError, DataContract
from .dataset import BRIDGE_INFO, YAM_INFO, DatasetWriter, EncodedDemo, claim_dataset_dir, encode_demo

PHASE_NAMES = ("planning", "manipulation")


@dataclass
class ImportedDemo:
    """One checked episode in memory, shaped like the scripted experts' demos (`encode_demo` reads it)."""

    instruction: str
    stacked: np.ndarray       # uint8 [T, h, views*w, 3] at the contract's size
    proprio: np.ndarray       # float32 [T, state dim]
    actions: np.ndarray       # float32 [T, action dim]
    phase_codes: np.ndarray   # uint8 [T]: 0 planning, 1 manipulation
    meta: dict                # suite, task, episode, seed, success and whatever else the source kept

    suite = property(lambda self: self.meta.get("suite", "imported"))
    task = property(lambda self: self.meta.get("task", 0))
    episode = property(lambda self: self.meta.get("episode", 0))
    seed = property(lambda self: self.meta.get("seed"))
    success = property(lambda self: bool(self.meta.get("success", True)))
    phases = property(lambda self: [PHASE_NAMES[int(p)] for p in self.phase_codes])

    def __len__(self) -> int:
        return len(self.actions)


def contract_info(contract: DataContract) -> dict:
    """meta/info.json fields every dataset at this contract carries (those of `vam-stack collect`'s sets)."""
    if contract.robot == "yam":
        base = dict(YAM_INFO)
    else:
        base = dict(BRIDGE_INFO)
    return base | {"fps": contract.fps, "frame_shape": list(contract.frame_shape), "action_type": contract.action_type,
                   "state_names": list(contract.state_names), "action_names": list(contract.action_names),
                   "views": list(contract.views)}


KEEP = ("suite", "task", "episode", "seed", "instruction", "length", "success")   # set by encode_demo


def write_imported(demos: Iterable, contract: DataContract, out: str | Path, source: dict,
                   base_info: dict | None = None, overwrite: bool = False) -> dict:
    """Write `demos` (`ImportedDemo`s, each checked against `contract` once more, or `EncodedDemo`s an importer
    checked) as a dataset at `out`; returns its info."""
    root = claim_dataset_dir(out, overwrite)
    tmp = root.with_name(root.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    writer = DatasetWriter(tmp)
    try:
        for d in demos:
            if isinstance(d, EncodedDemo):       # read and checked by the importer already
                writer.add(EncodedDemo(d.arrays, {k: v for k, v in d.meta.items() if k in KEEP}),
                           **{k: v for k, v in d.meta.items() if k not in KEEP})
                continue
            where = f"episode {d.meta.get('episode')}"
            if d.stacked.shape[1:] != contract.frame_shape or d.stacked.dtype != np.uint8:
                raise ContractError(f"{where}: frames {d.stacked.dtype} {d.stacked.shape[1:]}, the contract stores "
                                    f"uint8 {contract.frame_shape}")
            contract.check_values(f"{where}: state", d.proprio, "state")
            contract.check_values(f"{where}: action", d.actions, "action")
            if not len(d.proprio) == len(d.actions) == len(d.stacked) == len(d.phase_codes) >= 1:
                raise ContractError(f"{where}: lengths differ: {len(d.stacked)} frames, {len(d.proprio)} states, "
                                    f"{len(d.actions)} actions, {len(d.phase_codes)} phase labels")
            enc = encode_demo(d)
            writer.add(enc, **{k: v for k, v in d.meta.items() if k not in KEEP and k not in ("file", "index")})
        info = {k: v for k, v in (base_info or {}).items() if k not in ("format", "total_episodes", "total_frames")}
        info = info | contract_info(contract) | {"imported_from": source}
        writer.close(info)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    return info | {"total_episodes": len(writer.metas), "total_frames": writer.frames}
