"""LeRobotDataset v3.0 on disk, both ways: import a local v3 folder into a training set at a preset's
geometry, and export this project's datasets as v3 so lerobot's policies train on the same data.

The v3.0 layout (lerobot 0.4's `LeRobotDataset`, codebase_version "v3.0"):

    meta/info.json                           fps, features (dtype, shape, names), counts, path templates
    meta/stats.json                          per-feature min / max / mean / std / count
    meta/tasks.parquet                       task text (the pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet one row per episode: length, tasks, where its rows and
                                             video frames are (data/chunk_index, data/file_index,
                                             dataset_from_index, dataset_to_index,
                                             videos/<key>/chunk_index, .../file_index,
                                             .../from_timestamp, .../to_timestamp)
    data/chunk-000/file-000.parquet          many episodes per file: timestamp, frame_index,
                                             episode_index, index, task_index and the features
    videos/<key>/chunk-000/file-000.mp4      many episodes per file, one after the other

Parquet goes through pyarrow (pandas only for the tasks table's index), video through PyAV
(`video.py`). An import checks everything it can before it writes anything (version, rate,
names and order of the state and action dimensions, camera views and sizes, every value's range
against the preset's `DataContract`, frame indices and timestamps), then decodes each video
file once, in order, and writes into `<out>.partial`, renamed to `<out>` when complete. This
project's per-episode metadata (suite, seed, success, train_from, phase labels as the `phase`
feature) rides along in `meta/vam_stack.json`, so export -> import gives back the same samples
(bit-exact with `--codec lossless`).
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from vam_stack.config import from_yaml

from .contract import ContractError, contract_for_dataset
from .dataset import Dataset
from .video import CODECS, VideoWriter

CODEBASE_VERSION = "v3.0"
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
SIDECAR = "meta/vam_stack.json"     # this project's episode metadata (lerobot ignores the file)
SCALARS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


class LeRobotFormatError(ValueError):
    """A folder that is not a readable LeRobotDataset v3.0 (the message names the file and field)."""


@dataclass(frozen=True)
class LeRobotMapping:
    """Which LeRobot features hold what the preset needs (YAML section `lerobot_import`)."""

    state: str = "observation.state"       # feature holding the proprio (names checked against the contract)
    action: str = "action"                 # feature holding the commanded targets
    views: dict[str, str] = field(default_factory=dict)  # contract view -> feature key; a view not named
                                                         # here is `observation.images.<view>`
    phase: str = "phase"                   # feature of 0 planning / 1 manipulation labels, if the set has it

    def view_key(self, view: str) -> str:
        return self.views.get(view, f"observation.images.{view}")


def load_mapping(path: str | Path | None) -> LeRobotMapping:
    if path is None:
        return LeRobotMapping()
    return from_yaml(LeRobotMapping, path, "lerobot_import")


# ---- export ----------------------------------------------------------------------------------

def _vector(dim: int, names) -> dict:
    return {"dtype": "float32", "shape": [dim], "names": list(names)}


def _scalar(dtype: str) -> dict:
    return {"dtype": dtype, "shape": [1], "names": None}


def _stats(x: np.ndarray) -> dict:
    x = np.asarray(x, np.float64)
    return {"min": x.min(0).tolist(), "max": x.max(0).tolist(), "mean": x.mean(0).tolist(),
            "std": x.std(0).tolist(), "count": [int(len(x))]}


def _image_stats(sums: np.ndarray, sq: np.ndarray, lo: np.ndarray, hi: np.ndarray, n: int) -> dict:
    mean = sums / n
    std = np.sqrt(np.maximum(sq / n - mean ** 2, 0.0))
    shape = lambda v: (np.asarray(v, np.float64) / 255.0).reshape(3, 1, 1).tolist()   # noqa: E731 lerobot's [C,1,1]
    return {"min": shape(lo), "max": shape(hi), "mean": shape(mean), "std": shape(std), "count": [int(n)]}


def export_lerobot(dataset: str | Path, out: str | Path, codec: str = "av1", robot_type: str | None = None,
                   progress: Callable[[int, int], None] | None = None) -> dict:
    """Write the project dataset at `dataset` as a LeRobotDataset v3.0 folder `out` (must not exist);
    returns its info.json."""
    if codec not in CODECS:
        raise ValueError(f"codec must be one of {sorted(CODECS)}, got {codec!r}")
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{str(out)!r} exists; export writes a new folder")
    ds = Dataset(dataset)
    c = contract_for_dataset(ds.info)
    fps = ds.info.get("fps", c.fps)
    fps = int(fps) if float(fps).is_integer() else float(fps)
    keys = {v: f"observation.images.{v}" for v in c.views}
    _, pix_fmt, _, codec_name = CODECS[codec]
    features = {"observation.state": _vector(len(c.state_names), c.state_names),
                "action": _vector(len(c.action_names), c.action_names)}
    for key in keys.values():
        features[key] = {"dtype": "video", "shape": [c.view_height, c.view_width, 3],
                         "names": ["height", "width", "channels"],
                         "info": {"video.height": c.view_height, "video.width": c.view_width,
                                  "video.codec": codec_name, "video.pix_fmt": pix_fmt, "video.is_depth_map": False,
                                  "video.fps": fps, "video.channels": 3, "has_audio": False}}
    features["phase"] = _scalar("int64")
    features |= {"timestamp": _scalar("float32"), **{k: _scalar("int64") for k in SCALARS[1:]}}

    tasks: dict[str, int] = {}
    for e in ds.episodes:
        tasks.setdefault(e.meta["instruction"], len(tasks))
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    writers = {v: VideoWriter(tmp / VIDEO_PATH.format(video_key=k, chunk_index=0, file_index=0), c.view_width,
                              c.view_height, fps, codec) for v, k in keys.items()}
    cols: dict[str, list] = {k: [] for k in ("observation.state", "action", "phase", *SCALARS)}
    rows, img = [], {v: [np.zeros(3), np.zeros(3), np.full(3, 255.0), np.zeros(3), 0] for v in c.views}
    start = 0
    try:
        for i, e in enumerate(ds.episodes):
            n = len(e)
            frames = e.decode_all() if e.decoded is None else e.decoded          # [T, h, views*w, 3]
            if frames.shape[1:] != c.frame_shape:
                raise ContractError(f"{e.meta.get('file')}: frames {frames.shape[1:]}, info.json says {c.frame_shape}")
            t0 = writers[c.views[0]].frames / fps
            for j, v in enumerate(c.views):
                view = frames[:, :, j * c.view_width:(j + 1) * c.view_width]
                writers[v].write(view)
                s = img[v]
                flat = view.reshape(-1, 3).astype(np.float64)
                s[0] += flat.sum(0)
                s[1] += (flat ** 2).sum(0)
                s[2] = np.minimum(s[2], flat.min(0))
                s[3] = np.maximum(s[3], flat.max(0))
                s[4] += len(flat)
            cols["observation.state"].append(e.proprio.astype(np.float32))
            cols["action"].append(e.actions.astype(np.float32))
            cols["phase"].append(e.phase.astype(np.int64))
            cols["timestamp"].append((np.arange(n) / fps).astype(np.float32))
            cols["frame_index"].append(np.arange(n, dtype=np.int64))
            cols["episode_index"].append(np.full(n, i, np.int64))
            cols["index"].append(np.arange(start, start + n, dtype=np.int64))
            cols["task_index"].append(np.full(n, tasks[e.meta["instruction"]], np.int64))
            row = {"episode_index": i, "tasks": [e.meta["instruction"]], "length": n,
                   "data/chunk_index": 0, "data/file_index": 0,
                   "dataset_from_index": start, "dataset_to_index": start + n}
            for v, k in keys.items():
                row |= {f"videos/{k}/chunk_index": 0, f"videos/{k}/file_index": 0,
                        f"videos/{k}/from_timestamp": float(t0), f"videos/{k}/to_timestamp": float(t0 + n / fps)}
            row |= {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0}
            rows.append(row)
            start += n
            if progress is not None:
                progress(i + 1, len(ds.episodes))
    finally:
        for w in writers.values():
            w.close()

    data = {k: np.concatenate(v) for k, v in cols.items()}
    table = pa.table({
        "observation.state": pa.FixedSizeListArray.from_arrays(data["observation.state"].reshape(-1),
                                                               len(c.state_names)),
        "action": pa.FixedSizeListArray.from_arrays(data["action"].reshape(-1), len(c.action_names)),
        "phase": data["phase"], **{k: data[k] for k in SCALARS}})
    path = tmp / DATA_PATH.format(chunk_index=0, file_index=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    path = tmp / EPISODES_PATH.format(chunk_index=0, file_index=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    _write_tasks(tmp / "meta" / "tasks.parquet", tasks)
    stats = {"observation.state": _stats(data["observation.state"]), "action": _stats(data["action"]),
             "phase": _stats(data["phase"][:, None]), "timestamp": _stats(data["timestamp"][:, None]),
             **{k: _stats(data[k][:, None]) for k in SCALARS[1:]},
             **{keys[v]: _image_stats(*img[v]) for v in c.views}}
    (tmp / "meta" / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    info = {"codebase_version": CODEBASE_VERSION, "robot_type": robot_type or ds.info.get("robot", c.robot),
            "total_episodes": len(rows), "total_frames": int(start), "total_tasks": len(tasks),
            "chunks_size": 1000, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "fps": fps,
            "splits": {"train": f"0:{len(rows)}"}, "data_path": DATA_PATH, "video_path": VIDEO_PATH,
            "features": features}
    (tmp / "meta" / "info.json").write_text(json.dumps(info, indent=4) + "\n")
    sidecar = {"format": ds.info.get("format"), "info": ds.info, "codec": codec,
               "episodes": [{k: v for k, v in e.meta.items() if k not in ("file", "index")} for e in ds.episodes]}
    (tmp / SIDECAR).write_text(json.dumps(sidecar, indent=2) + "\n")
    tmp.rename(out)
    return info


def _write_tasks(path: Path, tasks: dict[str, int]) -> None:
    """meta/tasks.parquet as lerobot writes it: a pandas frame indexed by the task text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(pd.DataFrame({"task_index": list(tasks.values())}, index=pd.Index(list(tasks))))
    plain = pa.schema([pa.field(f.name, pa.string() if pa.types.is_large_string(f.type) else f.type)
                       for f in table.schema], metadata=table.schema.metadata)   # pandas 3 writes large_string
    pq.write_table(table.cast(plain), path)
