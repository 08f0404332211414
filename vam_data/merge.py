"""`vam-stack merge`: several datasets of this project into one training set.

    vam-stack merge runs/demos_rec runs/demos_yam_free_rt --out runs/demos_mixed

The trainer takes one base dataset (its instructions are the ones embedded, its statistics
normalise everything) plus `extra_datasets`; recorded demonstrations of one task and collected
ones of others therefore need one base holding both. `merge` writes it: every episode of every
source in the order given (episode files hard-linked where the file system allows, else
copied), episodes.jsonl with new indices and a `source` naming where each came from, the
statistics recomputed over every frame (as `collect` computes them), and info.json with what
all sources agree on plus `merged_from`. Sources must agree on everything a sample depends
on: format, rate, frame shape, action type and dimensions, joint names where both name them,
and the mocked-LIBERO conventions where either has them; a mismatch names the key and both
values, and nothing is written. Output goes to OUT.partial, renamed when complete.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from .dataset import DatasetError, check_finite, compute_stats, episode_path, write_meta

MUST_MATCH = ("format", "fps", "frame_shape", "action_type", "action_dim", "proprio_dim", "features")
MATCH_WHERE_PRESENT = ("action_names", "state_names", "views", "mock", "mock_conventions", "libero_render")


def _read(root: Path) -> tuple[dict, list[dict]]:
    info_path, ep_path = root / "meta" / "info.json", root / "meta" / "episodes.jsonl"
    if not info_path.is_file() or not ep_path.is_file():
        raise DatasetError(f"{str(root)!r} is not a dataset of this project (no meta/info.json and episodes.jsonl)")
    episodes = [json.loads(line) for line in ep_path.read_text().splitlines() if line.strip()]
    if not episodes:
        raise DatasetError(f"{root}: no episodes")
    return json.loads(info_path.read_text()), episodes


def check_compatible(infos: dict[str, dict]) -> None:
    """Refuse sources that disagree on what a sample means (names the key and both values)."""
    (first, ref), *rest = infos.items()
    for root, info in rest:
        for key in MUST_MATCH:
            if info.get(key) != ref.get(key):
                raise DatasetError(f"{root}: {key} is {info.get(key)!r}, {first} has {ref.get(key)!r}; "
                                   f"datasets that differ in it cannot be merged")
        for key in MATCH_WHERE_PRESENT:
            if key in info and key in ref and info[key] != ref[key]:
                raise DatasetError(f"{root}: {key} is {info[key]!r}, {first} has {ref[key]!r}")
            if key.startswith("mock") and (key in info) != (key in ref):
                raise DatasetError(f"{root}: {key} is {'present' if key in info else 'absent'} here and "
                                   f"{'present' if key in ref else 'absent'} in {first} (mocked LIBERO data with other data)")


def _place(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def merge_datasets(roots: list[str | Path], out: str | Path, progress=None) -> dict:
    """Write the merged dataset to `out`; returns its info."""
    roots = [Path(r) for r in roots]
    if len(roots) < 2:
        raise ValueError(f"merge needs at least two datasets, got {[str(r) for r in roots]}")
    if len({r.resolve() for r in roots}) != len(roots):
        raise ValueError(f"a dataset is named twice: {[str(r) for r in roots]}")
    read = {str(r): _read(r) for r in roots}
    check_compatible({k: v[0] for k, v in read.items()})
    out = Path(out)
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    arrays: dict[str, list[np.ndarray]] = {"action": [], "proprio": []}
    metas, merged_from = [], []
    total = sum(len(eps) for _, eps in read.values())
    try:
        for root, (info, episodes) in read.items():
            for ep in episodes:
                src = Path(root) / ep["file"]
                if not src.is_file():
                    raise DatasetError(f"{root}: episode {ep.get('index')} file {ep['file']!r} is missing")
                with np.load(src) as z:
                    act, prop = np.asarray(z["actions"]), np.asarray(z["proprio"])
                if len(act) == 0 or len(prop) == 0 or ep.get("length") == 0:   # merged, the set would not load
                    raise DatasetError(f"{src}: episode {ep.get('index')} of {root} has no frames (length "
                                       f"{ep.get('length')}): a zero-length episode cannot be merged; remove its "
                                       f"line from {Path(root) / 'meta' / 'episodes.jsonl'}")
                check_finite(src, {"actions": act, "proprio": prop})     # a NaN would merge into NaN statistics
                arrays["action"].append(act)
                arrays["proprio"].append(prop)
                dst = episode_path(tmp, len(metas))
                _place(src, dst)
                metas.append({**ep, "index": len(metas), "file": str(dst.relative_to(tmp)),
                              "source": {"dataset": root, "index": ep.get("index")}})
                if progress is not None:
                    progress(len(metas), total)
            merged_from.append({"dataset": root, "episodes": len(episodes),
                                "frames": int(sum(e["length"] for e in episodes)),
                                "info": {k: v for k, v in info.items() if k not in ("total_episodes", "total_frames")}})
        infos = [v[0] for v in read.values()]
        common = {k: v for k, v in infos[0].items()
                  if k not in ("total_episodes", "total_frames") and all(i.get(k) == v for i in infos[1:])}
        for key in ("action_names", "state_names", "views"):      # named by some sources: the names hold for all
            named = [i[key] for i in infos if key in i]
            if named:
                common[key] = named[0]
        write_meta(tmp, metas, compute_stats(arrays), {**common, "merged_from": merged_from})
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return json.loads((out / "meta" / "info.json").read_text())
