"""`vam-stack import --format lerobot`: a local LeRobotDataset v3.0 folder -> a training set at a preset's
geometry (the layout and the order of the checks: `lerobot_v3.py`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from vam_stack.instruction import check_instruction
from vam_stack.views import fit_views

from .contract import ContractError, DataContract
from .lerobot_v3 import CODEBASE_VERSION, SIDECAR, VIDEO_PATH, LeRobotFormatError, LeRobotMapping
from .video import VideoCursor, VideoError
from .writing import ImportedDemo, write_imported

TIME_TOLERANCE_S = 1e-3   # a frame's timestamp may differ from frame_index / fps by this much


def _json(path: Path) -> dict:
    if not path.is_file():
        raise LeRobotFormatError(f"{path}: missing (is this a LeRobotDataset v3.0 folder?)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise LeRobotFormatError(f"{path}: not JSON ({e})") from None


def _names(feature: dict):
    """A feature's dimension names: a list, or lerobot's older {"motors": [...]} form."""
    names = feature.get("names")
    if isinstance(names, dict) and len(names) == 1:
        names = next(iter(names.values()))
    return names if isinstance(names, list) else None


def _read_parquets(folder: Path, what: str):
    paths = sorted(folder.glob("chunk-*/file-*.parquet"))
    if not paths:
        raise LeRobotFormatError(f"{folder}: no {what} parquet files (chunk-*/file-*.parquet)")
    try:
        return pa.concat_tables([pq.read_table(p) for p in paths], promote_options="default")
    except (OSError, pa.ArrowException) as e:
        raise LeRobotFormatError(f"{folder}: unreadable {what} parquet ({type(e).__name__}: {e})") from None


def _column(table, name: str, where: str, width: int | None = None) -> np.ndarray:
    if name not in table.column_names:
        raise LeRobotFormatError(f"{where}: column {name!r} is missing (has {table.column_names})")
    col = table.column(name).combine_chunks()
    if width is None:
        return col.to_numpy(zero_copy_only=False)
    values = np.asarray(col.flatten().to_numpy(zero_copy_only=False))
    if values.size != len(col) * width:
        raise ContractError(f"{where}: {name} holds {values.size} values in {len(col)} rows, not {width} per row")
    return values.reshape(len(col), width)


@dataclass
class _Plan:
    """One checked episode, before any frame is decoded."""
    index: int
    instruction: str
    state: np.ndarray
    action: np.ndarray
    phase: np.ndarray
    timestamps: np.ndarray
    video: dict          # view -> (file path, from_timestamp)
    meta: dict


def plan_lerobot(root: str | Path, contract: DataContract, mapping: LeRobotMapping | None = None,
                 skipped: list | None = None) -> tuple[list[_Plan], dict]:
    """Every check that needs no frame: returns the episodes to import and the source's info.json. With a
    `skipped` list, an episode failing its own checks is appended there (episode, reason) instead of raising;
    the dataset-wide checks (version, rate, names, views) still raise."""
    root, m = Path(root), mapping or LeRobotMapping()
    info = _json(root / "meta" / "info.json")
    where = str(root / "meta" / "info.json")
    if not isinstance(info, dict):
        raise LeRobotFormatError(f"{where}: not a JSON object")
    version = info.get("codebase_version")
    if version != CODEBASE_VERSION:
        raise LeRobotFormatError(f"{where}: codebase_version is {version!r}, this importer reads {CODEBASE_VERSION!r} "
                                 f"(convert older sets with lerobot's v2.1 -> v3.0 converter)")
    contract.check_fps(where, info.get("fps"))
    feats = info.get("features")
    if not isinstance(feats, dict):
        raise LeRobotFormatError(f"{where}: 'features' is missing or not a mapping")
    for key, kind in ((m.state, "state"), (m.action, "action")):
        f = feats.get(key)
        if f is None:
            raise ContractError(f"{where}: feature {key!r} ({kind}) is missing (has {sorted(feats)})")
        if f.get("dtype") not in ("float32", "float64"):
            raise ContractError(f"{where}: {key} dtype is {f.get('dtype')!r}, expected float32 or float64")
        contract.check_names(f"{where}: {key}", _names(f), kind)
    views = {}
    for v in contract.views:
        key = m.view_key(v)
        f = feats.get(key)
        if f is None:
            contract.check_views(where, [k for k in contract.views if m.view_key(k) in feats])
        if f.get("dtype") != "video":
            raise ContractError(f"{where}: {key} has dtype {f.get('dtype')!r}; views are read from videos "
                                f"(dtype 'video')")
        contract.check_view(f"{where}: {key}", v, f.get("shape", ()))
        views[v] = key
    video_path = info.get("video_path") or VIDEO_PATH
    tasks_path = root / "meta" / "tasks.parquet"
    if not tasks_path.is_file():
        raise LeRobotFormatError(f"{tasks_path}: missing")
    tasks = pd.read_parquet(tasks_path)
    task_text = {int(i): str(t) for t, i in zip(tasks.index, tasks["task_index"])}
    eps = _read_parquets(root / "meta" / "episodes", "episodes")
    data = _read_parquets(root / "data", "data")
    dwhere = str(root / "data")
    state = _column(data, m.state, dwhere, len(contract.state_names)).astype(np.float32)
    action = _column(data, m.action, dwhere, len(contract.action_names)).astype(np.float32)
    ep_col, frame_col = _column(data, "episode_index", dwhere), _column(data, "frame_index", dwhere)
    ts_col, task_col = _column(data, "timestamp", dwhere).astype(np.float64), _column(data, "task_index", dwhere)
    phase_col = _column(data, m.phase, dwhere) if m.phase in data.column_names else None
    sidecar = _json(root / SIDECAR) if (root / SIDECAR).is_file() else None
    if sidecar is not None and not isinstance(sidecar, dict):
        raise LeRobotFormatError(f"{root / SIDECAR}: not a JSON object")
    fps = float(info["fps"])
    plans = []
    rows = eps.to_pylist()
    _check_episode_table(root, info, rows, ep_col, sidecar)
    columns = (state, action, ep_col, frame_col, ts_col, task_col, phase_col)
    for k, row in enumerate(sorted(rows, key=lambda r: r["episode_index"])):
        try:
            plans.append(_plan_episode(root, contract, m, k, row, columns, task_text, views, video_path, fps,
                                       sidecar))
        except (ContractError, LeRobotFormatError) as err:
            if skipped is None:
                raise
            skipped.append({"episode": int(row["episode_index"]), "reason": str(err)})
    if not plans:
        raise LeRobotFormatError(f"{root}: no episodes" + (f" passed their checks; the first: {skipped[0]['reason']}"
                                                           if skipped else ""))
    return plans, info | ({"sidecar": sidecar} if sidecar else {})


def _check_episode_table(root: Path, info: dict, rows: list[dict], ep_col: np.ndarray, sidecar: dict | None) -> None:
    """meta/episodes, data/, info.json and the sidecar agree on which episodes there are (dataset-wide:
    `--skip-bad` does not pass them). Before, a missing row dropped its data rows silently, a row listed
    twice imported the episode twice, and a sidecar of another length was ignored (seeds None)."""
    where = root / "meta" / "episodes"
    try:
        listed = [int(r["episode_index"]) for r in rows]
    except (KeyError, TypeError, ValueError):
        raise LeRobotFormatError(f"{where}: a row without an integer episode_index") from None
    twice = sorted({e for e in listed if listed.count(e) > 1})
    if twice:
        raise LeRobotFormatError(f"{where}: meta/episodes lists episode {twice[0]} twice"
                                 + (f" (and {twice[1:]})" if len(twice) > 1 else ""))
    in_data, counts = np.unique(ep_col, return_counts=True)
    unlisted = [(int(e), int(n)) for e, n in zip(in_data, counts) if int(e) not in set(listed)]
    if unlisted:
        e, n = unlisted[0]
        raise LeRobotFormatError(f"{root}: data holds {n} rows of episode {e}, which meta/episodes does not list"
                                 + (f" (nor episodes {[u for u, _ in unlisted[1:]]})" if len(unlisted) > 1 else ""))
    total = info.get("total_episodes")
    if total is not None and total != len(rows):
        raise LeRobotFormatError(f"{root / 'meta' / 'info.json'}: total_episodes is {total!r}, meta/episodes "
                                 f"lists {len(rows)}")
    if sidecar is not None:
        side = sidecar.get("episodes")
        if not isinstance(side, list) or len(side) != len(rows):
            raise LeRobotFormatError(f"{root / SIDECAR}: lists {len(side) if isinstance(side, list) else 'no'} "
                                     f"episodes, meta/episodes {len(rows)}: its seeds and tasks would not line up")


def _plan_episode(root, contract, m, k, row, columns, task_text, views, video_path, fps, sidecar) -> _Plan:
    """One episode's checks (rows, timestamps, values, task, video files)."""
    state, action, ep_col, frame_col, ts_col, task_col, phase_col = columns
    e = int(row["episode_index"])
    ew = f"{root}: episode {e}"
    sel = np.flatnonzero(ep_col == e)
    sel = sel[np.argsort(frame_col[sel], kind="stable")]
    n = int(row.get("length", len(sel)))
    if n == 0 or len(sel) == 0:
        raise LeRobotFormatError(f"{ew}: zero-length episode (length {n}, {len(sel)} data rows): nothing to "
                                 f"import; drop it from meta/episodes or pass --skip-bad")
    if len(sel) != n or not np.array_equal(frame_col[sel], np.arange(n)):
        raise LeRobotFormatError(f"{ew}: {len(sel)} data rows with frame_index {frame_col[sel][:3].tolist()}..., "
                                 f"the episode row says length {n} (frame_index 0..{n - 1})")
    ts = ts_col[sel]
    off = np.abs(ts - np.arange(n) / fps)
    if off.max() > TIME_TOLERANCE_S:
        t = int(off.argmax())
        raise ContractError(f"{ew}: timestamp at frame {t} is {ts[t]:.4f} s, {fps:g} Hz puts it at {t / fps:.4f} s "
                            f"(dropped or repeated frames; nothing is resampled silently)")
    contract.check_values(f"{ew}: {m.state}", state[sel], "state")
    contract.check_values(f"{ew}: {m.action}", action[sel], "action")
    task_ids = np.unique(task_col[sel])
    if len(task_ids) != 1:
        raise ContractError(f"{ew}: {len(task_ids)} tasks in one episode ({task_ids.tolist()}); an episode "
                            f"has one instruction")
    text = task_text.get(int(task_ids[0]))
    if text is None:
        raise LeRobotFormatError(f"{ew}: task_index {int(task_ids[0])} is not in meta/tasks.parquet")
    try:
        check_instruction(text)
    except ValueError as err:
        raise ContractError(f"{ew}: task text: {err}") from None
    phase = np.ones(n, np.uint8)
    if phase_col is not None:
        phase = phase_col[sel]
        if not np.isin(phase, (0, 1)).all():
            raise ContractError(f"{ew}: {m.phase} holds {sorted(set(np.unique(phase).tolist()))}, expected 0/1")
        phase = phase.astype(np.uint8)
    video = {}
    for v, key in views.items():
        try:
            path = root / video_path.format(video_key=key, chunk_index=int(row[f"videos/{key}/chunk_index"]),
                                            file_index=int(row[f"videos/{key}/file_index"]))
            t0 = float(row[f"videos/{key}/from_timestamp"])
        except KeyError as err:
            raise LeRobotFormatError(f"{ew}: the episode row lacks {err.args[0]!r}") from None
        if not path.is_file():
            raise LeRobotFormatError(f"{ew}: video {path} is missing")
        video[v] = (path, t0)
    meta = {"suite": contract.suite, "task": int(task_ids[0]), "episode": e, "seed": None, "success": True}
    if sidecar is not None:
        meta |= sidecar["episodes"][k]
    return _Plan(e, text, state[sel], action[sel], phase, ts, video, meta)


class _Videos:
    """One forward-decoding cursor per view file; frames are resized to the contract as they are taken, so a
    dataset of large views never sits decoded in memory."""

    def __init__(self, contract: DataContract):
        self.c, self.cursors = contract, {}

    def frames(self, view: str, path: Path, t0: float, timestamps: np.ndarray, where: str) -> np.ndarray:
        cur = self.cursors.get(view)
        if cur is None or cur.path != path:
            if cur is not None:
                cur.close()
            cur = self.cursors[view] = VideoCursor(path, self.c.fps)
        try:
            got = cur.take(t0 + timestamps, where)
        except VideoError as e:
            raise LeRobotFormatError(str(e)) from None
        self.c.check_view(f"{where}: {path}", view, got.shape[1:])
        return fit_views(got, 1, self.c.view_width, self.c.view_height)

    def close(self) -> None:
        for cur in self.cursors.values():
            cur.close()


def import_lerobot(root: str | Path, contract: DataContract, out: str | Path, mapping: LeRobotMapping | None = None,
                   overwrite: bool = False, progress: Callable[[int, int], None] | None = None,
                   skip_bad: bool = False) -> dict:
    """Check the whole source, then write it as a dataset of this project at `out`; returns the info.
    `skip_bad`: an episode failing its own checks is left out (named in the info's `skipped`)."""
    skipped: list | None = [] if skip_bad else None
    plans, src = plan_lerobot(root, contract, mapping, skipped)
    videos = _Videos(contract)
    base = (src.get("sidecar") or {}).get("info") or {}

    def demos():
        for i, p in enumerate(plans):
            where = f"{root}: episode {p.index}"
            views = [videos.frames(v, *p.video[v], p.timestamps, where) for v in contract.views]
            yield ImportedDemo(instruction=p.instruction, stacked=np.concatenate(views, axis=2), proprio=p.state,
                               actions=p.action, phase_codes=p.phase, meta=p.meta)
            if progress is not None:
                progress(i + 1, len(plans))

    source = {"format": f"LeRobotDataset {CODEBASE_VERSION}", "root": str(Path(root).resolve()),
              "robot_type": src.get("robot_type"), "episodes": len(plans), "skipped": skipped or []}
    try:
        return write_imported(demos(), contract, out, source, base_info=base, overwrite=overwrite)
    finally:
        videos.close()

