"""Demonstration dataset on disk (a LeRobot-like layout without LeRobot's dependencies).

Layout of a dataset directory:

    meta/info.json         format version, fps, shapes, feature names, episode/frame counts
    meta/episodes.jsonl    one JSON line per episode: index, suite, task, episode, seed,
                           instruction, length, success, file (recovery rounds add
                           source "recovery", takeover_step, round)
    meta/stats.json        per-dimension mean/std of `action` and `proprio` (all frames)
    data/chunk-000/episode_000000.npz   one file per episode (1000 episodes per chunk):
        proprio        float32 [T, 8]   observation.state at step t
        actions        float32 [T, 7]   action taken after observing step t
        phase          uint8   [T]      0 = planning, 1 = manipulation (expert labels)
        frame_offsets  int64   [T + 1]  byte offsets of each frame in `frames_png`
        frames_png     uint8   [N]      concatenated PNG files of the stacked 224x448 RGB
                                        frames (agentview | wrist), lossless

PNG keeps the frames bit-exact (the renderer's flat shading compresses to ~8 kB a frame).
`Dataset` loads every episode into memory as compressed bytes and decodes frames on demand.

Training samples follow the inference convention: the clip of step t is the policy frames
[t, t+s, ..., t+16s] at the preset's frame skip s (the current frame first; past the episode
end the last frame repeats), the action target is actions[t : t+chunk] (past the end: zero
motion and the last gripper command for deltas, the last target for absolute targets, as
`meta/info.json`'s `action_type` says), the proprio is that of step t. The simulated YAM's
datasets (`vam_sim/collect_yam.py`) store 14-dim proprio and actions and three views side by side.
"""
from __future__ import annotations

import json
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from vam_stack.instruction import check_instruction
from vam_stack.views import fit_views

FORMAT = "vam_stack.demos/v1"
PHASE_CODES = {"planning": 0, "manipulation": 1}
CHUNK_EPISODES = 1000
STD_FLOOR = {"action": 0.05, "proprio": 0.01}  # std floor (units of the data) for near-constant dims


# what every dataset recorded on the mocked LIBERO bridge says about itself (meta/info.json);
# `vam_sim.collect.bridge_info(mock)` adds the rate, frame shape and the whole mock configuration it ran with
BRIDGE_INFO = {"robot": "mocked LIBERO (libero_bridge)", "action_dim": 7, "proprio_dim": 8,
               "features": {"frames": "PNG, stacked agentview|wrist RGB (the rendered size)",
                            "proprio": "eef xyz (LIBERO world frame), axis-angle, fingers",
                            "actions": "eef delta xyz, rot xyz (LIBERO world frame), gripper (+1 close)",
                            "phase": "0 planning, 1 manipulation"}}

# what every dataset of the simulated bimanual YAM says about itself (vam_sim/collect_yam.py, imports)
YAM_INFO = {"robot": "simulated bimanual YAM (vam_sim.yam_mujoco)", "action_dim": 14, "proprio_dim": 14,
            "action_type": "absolute_joint", "fps": 30.0,
            "features": {"frames": "PNG, stacked top|left_wrist|right_wrist RGB at the stored view size",
                         "proprio": "14 measured driver values: 2 x (6 joint angles [rad] + gripper opening 0..1)",
                         "actions": "14 absolute driver targets, same units (the expert's command)",
                         "phase": "0 planning, 1 manipulation"}}


class DatasetError(ValueError):
    """A dataset directory or file that does not follow the documented format."""


def encode_frame(frame: np.ndarray) -> bytes:
    """uint8 RGB [H, W, 3] -> PNG bytes (stored as BGR by OpenCV, decoded back to RGB)."""
    ok, buf = cv2.imencode(".png", cv2.cvtColor(frame, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 1])
    if not ok:
        raise DatasetError(f"PNG encoding failed for a frame of shape {frame.shape}")
    return buf.tobytes()


def decode_frame(data: np.ndarray) -> np.ndarray:
    img = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if img is None:
        raise DatasetError("a stored frame is not a decodable PNG")
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def episode_path(root: Path, index: int) -> Path:
    return root / "data" / f"chunk-{index // CHUNK_EPISODES:03d}" / f"episode_{index:06d}.npz"


def claim_dataset_dir(out: str | Path, overwrite: bool) -> Path:
    """`out` as a dataset directory to (re)write: a non-empty `out` is refused (FileExistsError)
    unless it is a dataset and `overwrite` is set; a directory that is not a dataset is never
    replaced. Creates and removes nothing."""
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"--out {str(root)!r} is a file, not a dataset directory")
    if root.exists() and any(root.iterdir()):
        if not (root / "meta" / "info.json").is_file():
            raise FileExistsError(f"{str(root)!r} exists and is not a dataset; refusing to overwrite it")
        if not overwrite:
            raise FileExistsError(f"--out {str(root)!r} already holds a dataset; pass --overwrite to replace it, "
                                  f"or choose another directory")
    return root


@dataclass
class EncodedDemo:
    """One demonstration in its stored form: the episode file's arrays (frames as PNG) and its
    metadata. Small (~8 kB a frame), so worker processes can hand it back cheaply."""

    arrays: dict[str, np.ndarray]   # proprio, actions, phase, frame_offsets, frames_png (the npz members)
    meta: dict                      # suite, task, episode, seed, instruction, length, success


def encode_demo(demo) -> EncodedDemo:
    """A rendered `vam_sim.libero_mock.Demo` -> its stored form (checks frames and phase labels)."""
    name = f"{demo.suite} task {demo.task} episode {demo.episode}"
    if demo.stacked is None:
        raise DatasetError(f"{name}: the demo was recorded without rendering (no frames)")
    bad = sorted(set(demo.phases) - set(PHASE_CODES))
    if bad:
        raise DatasetError(f"{name}: unknown phase labels {bad}")
    blobs = [encode_frame(f) for f in demo.stacked]
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in blobs])
    arrays = {"proprio": demo.proprio.astype(np.float32), "actions": demo.actions.astype(np.float32),
              "phase": np.array([PHASE_CODES[p] for p in demo.phases], dtype=np.uint8),
              "frame_offsets": offsets, "frames_png": np.frombuffer(b"".join(blobs), dtype=np.uint8)}
    meta = {"suite": demo.suite, "task": demo.task, "episode": demo.episode, "seed": demo.seed,
            "instruction": demo.instruction, "length": len(demo), "success": bool(demo.success)}
    return EncodedDemo(arrays, meta)


def write_episode(root: Path, index: int, demo) -> dict:
    """Write one rendered `vam_sim.libero_mock.Demo` (or its `EncodedDemo`) as episode `index`; returns
    its metadata line."""
    enc = demo if isinstance(demo, EncodedDemo) else encode_demo(demo)
    path = episode_path(root, index)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **enc.arrays)
    return {"index": index, **enc.meta, "file": str(path.relative_to(root))}


def compute_stats(arrays: dict[str, list[np.ndarray]]) -> dict[str, list[float]]:
    """Per-dimension mean/std over all frames (std floored so normalised targets stay bounded)."""
    out = {}
    for key, chunks in arrays.items():
        x = np.concatenate(chunks, axis=0).astype(np.float64)
        out[f"{key}_mean"] = x.mean(0).tolist()
        out[f"{key}_std"] = np.maximum(x.std(0), STD_FLOOR[key]).tolist()
    return out


def write_meta(root: Path, episodes: list[dict], stats: dict, info: dict) -> None:
    meta = root / "meta"
    meta.mkdir(parents=True, exist_ok=True)
    info = {"format": FORMAT, "total_episodes": len(episodes),
            "total_frames": int(sum(e["length"] for e in episodes)), **info}
    (meta / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    (meta / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    (meta / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")


class DatasetWriter:
    """Writes episodes one at a time (frames never all in memory), then the meta files with the
    statistics of every frame written."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.metas: list[dict] = []
        self._arrays: dict[str, list[np.ndarray]] = {"action": [], "proprio": []}

    def add(self, demo, **extra) -> dict:
        """Write one rendered `Demo` (or `EncodedDemo`) as the next episode; `extra` joins its
        episodes.jsonl line."""
        enc = demo if isinstance(demo, EncodedDemo) else encode_demo(demo)
        meta = write_episode(self.root, len(self.metas), enc) | extra
        self.metas.append(meta)
        self._arrays["action"].append(enc.arrays["actions"])
        self._arrays["proprio"].append(enc.arrays["proprio"])
        return meta

    @property
    def frames(self) -> int:
        return int(sum(m["length"] for m in self.metas))

    def close(self, info: dict) -> Path:
        if not self.metas:
            raise DatasetError(f"{self.root}: no demonstrations to write")
        write_meta(self.root, self.metas, compute_stats(self._arrays), info)
        return self.root


def write_dataset(root: str | Path, demos, info: dict | None = None) -> Path:
    """Write an iterable of rendered `Demo`s as a complete dataset (episodes, stats, meta)."""
    writer = DatasetWriter(root)
    for demo in demos:
        writer.add(demo)
    return writer.close(info or {})


@dataclass
class Episode:
    meta: dict
    proprio: np.ndarray      # [T, 8]
    actions: np.ndarray      # [T, 7]
    phase: np.ndarray        # [T] uint8
    offsets: np.ndarray      # [T + 1]
    blob: np.ndarray         # concatenated PNG bytes
    decoded: np.ndarray | None = None  # [T, H, W, 3] uint8 once `Dataset.cache_frames` ran

    def __len__(self) -> int:
        return len(self.actions)

    def _decode(self, t: int) -> np.ndarray:
        try:
            return decode_frame(self.blob[self.offsets[t]: self.offsets[t + 1]])
        except DatasetError as e:
            raise DatasetError(f"{self.meta.get('file', '?')}: frame {t}: {e}") from None

    def frame(self, t: int) -> np.ndarray:
        return self._decode(t) if self.decoded is None else self.decoded[t]

    def decode_all(self) -> np.ndarray:
        return np.stack([self._decode(t) for t in range(len(self))])


def available_memory() -> int | None:
    """Bytes the kernel reports as available (/proc/meminfo MemAvailable); None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_stats(path: Path, stats: dict) -> None:
    """Every mean/std finite, every std > 0: a NaN or zero std would poison or blow up normalisation."""
    for key in ("action", "proprio"):
        for part in ("mean", "std"):
            name = f"{key}_{part}"
            try:
                v = np.asarray(stats[name], dtype=np.float64)
            except (KeyError, TypeError, ValueError):
                raise DatasetError(f"{path}: {name!r} is missing or not a list of numbers") from None
            bad = np.flatnonzero(~np.isfinite(v) | ((v <= 0) if part == "std" else False))
            if bad.size:
                raise DatasetError(f"{path}: {name}[{int(bad[0])}] = {float(v[bad[0]])!r} "
                                   f"({'must be finite and > 0' if part == 'std' else 'must be finite'})")


def check_finite(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Every value of the numeric `arrays` (proprio, actions) finite, or DatasetError naming the file,
    the array, the first bad [step, dim] and its value: a NaN action poisons the statistics and then
    training (a FloatingPointError at step 2), an inf proprio loads silently."""
    for key, a in arrays.items():
        bad = ~np.isfinite(np.asarray(a, dtype=np.float64))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise DatasetError(f"{path}: {key}[{', '.join(map(str, idx))}] = {float(a[idx])!r} "
                               f"({int(bad.sum())} non-finite value{'s' if bad.sum() > 1 else ''}): "
                               f"demonstrations must hold finite numbers")


def _check_frames(path: Path, ep: "Episode") -> None:
    """Frame offsets increase within the blob and every frame starts with the PNG signature (a cheap
    check of all frames now; a frame that still fails to decode later is named with its file)."""
    off = ep.offsets.astype(np.int64)
    if off[0] != 0 or (np.diff(off) <= 8).any() or off[-1] != ep.blob.size:
        raise DatasetError(f"{path}: frame offsets do not cut the PNG blob of {ep.blob.size} bytes into frames")
    heads = ep.blob[off[:-1, None] + np.arange(8)]                  # [T, 8] first bytes of each frame
    bad = np.flatnonzero((heads != np.frombuffer(PNG_MAGIC, np.uint8)).any(axis=1))
    if bad.size:
        raise DatasetError(f"{path}: frame {int(bad[0])} is not a PNG ({bad.size} such frames)")


class Dataset:
    """All episodes of a dataset directory, in memory (frames stay PNG-compressed)."""

    def __init__(self, root: str | Path, suites: list[str] | None = None):
        self.root = Path(root)
        info_path = self.root / "meta" / "info.json"
        if not info_path.is_file():
            raise DatasetError(f"{str(self.root)!r} is not a dataset: {info_path} is missing (run `vam-stack collect`)")
        self.info = json.loads(info_path.read_text())
        if self.info.get("format") != FORMAT:
            raise DatasetError(f"{info_path}: format is {self.info.get('format')!r}, expected {FORMAT!r}")
        self.stats = json.loads((self.root / "meta" / "stats.json").read_text())
        _check_stats(self.root / "meta" / "stats.json", self.stats)
        lines = (self.root / "meta" / "episodes.jsonl").read_text().splitlines()
        try:
            metas = [json.loads(line) for line in lines if line.strip()]
        except json.JSONDecodeError as e:
            raise DatasetError(f"{self.root / 'meta' / 'episodes.jsonl'}: not JSON lines ({e})") from None
        if suites:
            metas = [m for m in metas if m["suite"] in suites]
        if not metas:
            raise DatasetError(f"{self.root}: no episodes" + (f" of suites {suites}" if suites else ""))
        self.episodes: list[Episode] = []
        for m in metas:
            path = self.root / m["file"]
            if not path.is_file():
                raise DatasetError(f"{self.root}: episode file {m['file']!r} listed in episodes.jsonl is missing")
            try:
                check_instruction(m.get("instruction"))
            except ValueError as e:
                raise DatasetError(f"{self.root}: episode {m.get('index')} ({m['file']}): {e}") from None
            if m.get("length") == 0:
                raise DatasetError(f"{path}: episode {m.get('index')} has no frames (length 0): a zero-length "
                                   f"episode cannot be trained on; remove its line from meta/episodes.jsonl")
            try:
                with np.load(path) as z:
                    ep = Episode(m, z["proprio"], z["actions"], z["phase"], z["frame_offsets"], z["frames_png"])
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:   # truncated, not an npz
                raise DatasetError(f"{path}: unreadable episode file ({type(e).__name__}: {e})") from None
            if not (len(ep.proprio) == len(ep.actions) == len(ep.phase) == len(ep.offsets) - 1 == m["length"]):
                raise DatasetError(f"{path}: array lengths disagree with the listed length {m['length']}")
            check_finite(path, {"proprio": ep.proprio, "actions": ep.actions})
            _check_frames(path, ep)
            start = m.get("train_from", 0)
            if not (isinstance(start, int) and not isinstance(start, bool) and 0 <= start < m["length"]):
                raise DatasetError(f"{self.root}: episode {m.get('index')} has train_from {start!r}; it must be an "
                                   f"int step in [0, {m['length']})")
            self.episodes.append(ep)
        lengths = np.array([len(e) for e in self.episodes])
        self._cum = np.concatenate([[0], np.cumsum(lengths)])
        self.instructions = sorted({e.meta["instruction"] for e in self.episodes})

    def extend(self, other: "Dataset") -> None:
        """Append `other`'s episodes (e.g. a recovery round); this dataset's statistics stay in force."""
        new = sorted({e.meta["instruction"] for e in other.episodes} - set(self.instructions))
        if new:
            raise DatasetError(f"{other.root}: instructions {new} are not in {self.root}; the trainer embeds the "
                               f"base dataset's instructions only")
        self.episodes.extend(other.episodes)
        lengths = np.array([len(e) for e in self.episodes])
        self._cum = np.concatenate([[0], np.cumsum(lengths)])

    def cache_frames(self, threads: int = 1, progress=None, max_fraction: float = 0.8,
                     fit: tuple[int, int, int] | None = None) -> int:
        """Decode every frame not yet decoded into memory (PNG decoding releases the GIL, so
        `threads` decode in parallel); returns the bytes held. `fit` = (views, width, height)
        keeps them at a model's view size instead (`vam_stack.views.fit_views`, the
        camera path's rule). Refuses, before decoding anything, when the frames would take more
        than `max_fraction` of the available memory."""
        todo = [e for e in self.episodes if e.decoded is None]
        shape = tuple(self.info.get("frame_shape", (224, 448, 3)))
        if fit is not None:
            shape = (fit[2], fit[0] * fit[1], 3)
        n = sum(len(e) for e in todo)
        need = int(n * np.prod(shape))
        avail = available_memory()
        if avail is not None and need > max_fraction * avail:
            raise MemoryError(f"{self.root}: caching {n} decoded frames needs "
                              f"{need / 2**30:.1f} GiB, more than {max_fraction:.0%} of the "
                              f"{avail / 2**30:.1f} GiB available; turn train.cache_frames off")
        with ThreadPoolExecutor(max(1, threads)) as pool:
            decode = Episode.decode_all if fit is None else (lambda e: fit_views(e.decode_all(), *fit))
            for e, frames in zip(todo, pool.map(decode, todo)):
                e.decoded = frames
                if progress is not None:
                    progress(len(e))
        return int(sum(e.decoded.nbytes for e in self.episodes if e.decoded is not None))

    def __len__(self) -> int:
        """Number of training samples (one per recorded step)."""
        return int(self._cum[-1])

    def locate(self, i: int) -> tuple[int, int]:
        """Sample index -> (episode index, step)."""
        if not 0 <= i < len(self):
            raise IndexError(f"sample index {i} out of range [0, {len(self)})")
        e = int(np.searchsorted(self._cum, i, side="right") - 1)
        return e, int(i - self._cum[e])

    @property
    def absolute_actions(self) -> bool:
        """Whether actions are absolute targets (the simulated YAM), not deltas (LIBERO)."""
        return self.info.get("action_type") == "absolute_joint"

    def sample(self, i: int, frames: int = 17, chunk: int = 17, skip: int = 1) -> dict:
        """One training sample (see the module docstring for the alignment convention); the clip
        takes every `skip`-th recorded frame (the preset's frame skip)."""
        e, t = self.locate(i)
        ep = self.episodes[e]
        n = len(ep)
        idx = np.minimum(t + skip * np.arange(frames), n - 1)
        decoded = {int(k): ep.frame(int(k)) for k in np.unique(idx)}       # repeated end frames decode once
        clip = np.stack([decoded[int(k)] for k in idx])                   # [F, H, W, 3] uint8
        act = ep.actions[t: t + chunk]
        if len(act) < chunk:
            if self.absolute_actions:                                    # absolute targets: hold the last one
                pad = np.repeat(ep.actions[-1:], chunk - len(act), axis=0)
            else:                                                        # deltas: no motion, last gripper command
                pad = np.zeros((chunk - len(act), act.shape[1]), dtype=np.float32)
                pad[:, -1] = ep.actions[-1, -1]
            act = np.concatenate([act, pad])
        return {"frames": clip, "actions": act.astype(np.float32), "proprio": ep.proprio[t],
                "instruction": ep.meta["instruction"], "phase": int(ep.phase[t]), "episode": e, "step": t}

    def normalise(self, key: str, x: np.ndarray) -> np.ndarray:
        mean = np.asarray(self.stats[f"{key}_mean"], dtype=np.float32)
        std = np.asarray(self.stats[f"{key}_std"], dtype=np.float32)
        return (x - mean) / std
