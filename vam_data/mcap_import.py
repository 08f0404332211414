"""`vam-stack import --format mcap`: ROS 2 recordings (one episode each) -> a training set at a preset's
geometry.

Reads rosbag2 MCAP through rosbags: this project's recordings (`vam-stack record`, the
`demo_recorder` node, `McapRecorder`) and `ros2 bag record -s mcap` output (a bag folder with
metadata.yaml, or its .mcap file). Which topic holds what is a small YAML (`McapMapping`, section
`mcap_import`; config/mcap_import_yam.yaml is the graph's own names):

- every message on `targets` (sensor_msgs/JointState) is one tick at its header stamp; the action
  of the tick is that command, reordered by joint name to the contract's order. The default is the
  teleoperator's raw command (/teleop/joint_command, what a leader arm reads), not the safety
  filter's output: a policy trained on the filtered stream learns the filter's gripper ramps and
  clipped steps, and measured worse (docs/your_data.md);
- the state of the tick is the newest `joint_states` message stamped at or before it, the frame
  the newest message of each `images` topic (sensor_msgs/Image or CompressedImage; one stacked
  topic, or one topic per view in the contract's order), each resized view by view to the preset's
  size (the camera path's rule);
- ticks before every stream has started are dropped; a state or frame older than `max_age_s` at a
  tick, a gap in the targets longer than `max_gap_ticks` periods, or a target rate off the contract's
  by more than `rate_tolerance` is an error naming the recording, the stream and the time;
- the instruction is the last `instruction` message (std_msgs/String) before the first tick; the
  phase label, when `phase` is set and recorded, the newest /vam/phase text at each tick
  (planning | manipulation), else manipulation throughout.

Every recording is checked completely before the first episode is written.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from rosbags.rosbag2 import ReaderError

from vam_stack.config import check, from_yaml
from vam_stack.image_msgs import compressed_image_to_numpy, image_to_numpy
from vam_stack.instruction import check_instruction
from vam_stack.msgs import deserialize
from vam_stack.msg_base import MessageError
from vam_stack.recording import Reader
from vam_stack.views import fit_views

from .contract import ContractError, DataContract
from .dataset import encode_demo
from .writing import ImportedDemo, write_imported


class RecordingFormatError(ValueError):
    """A recording that is unreadable or lacks a mapped topic (the message names both)."""


@dataclass(frozen=True)
class McapMapping:
    """Topic names of one episode's recording (see the module docstring)."""

    joint_states: str = "/joint_states"           # measured joints, sensor_msgs/JointState (the state)
    targets: str = "/teleop/joint_command"        # the action, sensor_msgs/JointState, one tick each: the teleoperator's
                                                  # raw command (a leader arm's reading); /vam/joint_targets is the
                                                  # safety-filtered stream (gripper ramps, clipped steps) instead
    images: tuple[str, ...] = ("/camera/stacked/image_raw",)  # one stacked image topic, or one per view in order
    instruction: str = "/vam/instruction"         # std_msgs/String, the episode's instruction
    phase: str = "/vam/phase"                     # std_msgs/String planning|manipulation; "" = not recorded
    max_age_s: float = 0.1                        # newest state / frame may be this old at a tick [s]
    max_gap_ticks: float = 2.5                    # a pause in the targets longer than this many periods is an error
    rate_tolerance: float = 0.05                  # the mean target period may differ from 1/fps by this fraction
    skip_start_ticks: int = field(default=0)      # ticks dropped after the first complete one (e.g. a start-up hold)

    def __post_init__(self):
        for name in ("joint_states", "targets", "instruction"):
            check(str(getattr(self, name)).startswith("/"), f"mcap_import.{name} must be a topic name, got "
                                                            f"{getattr(self, name)!r}")
        check(len(self.images) >= 1 and all(str(t).startswith("/") for t in self.images),
              f"mcap_import.images must list image topics, got {self.images!r}")
        check(0 < self.max_age_s <= 1.0, f"mcap_import.max_age_s must be in (0, 1] s, got {self.max_age_s!r}")
        check(1.0 < self.max_gap_ticks <= 30, f"mcap_import.max_gap_ticks must be in (1, 30], got {self.max_gap_ticks!r}")
        check(0 < self.rate_tolerance <= 0.5, f"mcap_import.rate_tolerance must be in (0, 0.5], got {self.rate_tolerance!r}")
        check(self.skip_start_ticks >= 0, f"mcap_import.skip_start_ticks must be >= 0, got {self.skip_start_ticks!r}")


def load_mapping(path: str | Path | None) -> McapMapping:
    if path is None:
        return McapMapping()
    return from_yaml(McapMapping, path, "mcap_import")


def find_recordings(source: str | Path) -> list[Path]:
    """One recording (.mcap file or rosbag2 folder) or a folder of them, sorted by name."""
    src = Path(source)
    if src.is_file() or (src / "metadata.yaml").is_file():
        return [src]
    if not src.is_dir():
        raise RecordingFormatError(f"{str(src)!r} is neither a recording nor a folder of recordings")
    found = sorted(p for p in src.iterdir() if p.suffix == ".mcap" or (p / "metadata.yaml").is_file())
    if not found:
        raise RecordingFormatError(f"{src}: no .mcap files or rosbag2 folders in it")
    return found


def _stamp(msg, t_ns: int) -> float:
    s = msg.header.stamp
    v = s.sec + s.nanosec * 1e-9
    return v if v > 0 else t_ns * 1e-9


def _image(msg, msgtype: str, where: str) -> np.ndarray:
    """A colour frame of an Image or CompressedImage; `where` ("<recording>: <topic>") names it in a refusal."""
    try:
        img = compressed_image_to_numpy(msg) if msgtype.endswith("CompressedImage") else image_to_numpy(msg)
    except MessageError as e:
        raise RecordingFormatError(f"{where}: {e}") from None
    if img.ndim != 3 or img.shape[2] != 3:
        enc = getattr(msg, "encoding", None) or getattr(msg, "format", "?")
        raise RecordingFormatError(f"{where}: images are {enc} ({'x'.join(map(str, img.shape))}), not colour: the "
                                   f"import takes rgb8 or bgr8 (or their compressed form) views")
    return img


def read_episode(path: Path, contract: DataContract, m: McapMapping) -> ImportedDemo:
    """One recording -> one checked episode at the contract's geometry."""
    per_view = len(m.images) > 1
    if per_view and len(m.images) != len(contract.views):
        raise ContractError(f"mcap_import.images lists {len(m.images)} topics, the {contract.preset} contract has "
                            f"{len(contract.views)} views {list(contract.views)}")
    states, targets, texts, phases = [], [], [], []
    frames: dict[str, list] = {t: [] for t in m.images}
    wanted = {m.joint_states, m.targets, m.instruction, *m.images} | ({m.phase} if m.phase else set())
    try:
        with Reader(path) as reader:
            conns = [c for c in reader.connections if c.topic in wanted]
            have = {c.topic for c in conns}
            for t in (m.joint_states, m.targets, m.instruction, *m.images):
                if t not in have:
                    raise RecordingFormatError(f"{path}: topic {t} is not recorded (has "
                                               f"{sorted(c.topic for c in reader.connections)})")
            for conn, t_ns, raw in reader.messages(connections=conns):
                msg = deserialize(raw, conn.msgtype)
                if conn.topic in (m.joint_states, m.targets):
                    row = (_stamp(msg, t_ns), list(msg.name), np.asarray(msg.position, np.float64))
                    (states if conn.topic == m.joint_states else targets).append(row)
                elif conn.topic == m.instruction:
                    texts.append((t_ns * 1e-9, str(msg.data)))
                elif conn.topic == m.phase:
                    phases.append((t_ns * 1e-9, str(msg.data)))
                else:
                    img = _image(msg, conn.msgtype, f"{path}: {conn.topic}")
                    n = 1 if per_view else len(contract.views)
                    if not per_view:
                        for j, v in enumerate(contract.views):
                            w = img.shape[1] // n
                            contract.check_view(f"{path}: {conn.topic}", v, (img.shape[0], w, 3))
                    else:
                        contract.check_view(f"{path}: {conn.topic}", contract.views[m.images.index(conn.topic)],
                                            img.shape)
                    frames[conn.topic].append((_stamp(msg, t_ns), fit_views(img, n, contract.view_width,
                                                                            contract.view_height)))
    except (RecordingFormatError, ContractError):
        raise
    except (ReaderError, MessageError, ValueError, KeyError, IndexError, EOFError, OSError, struct.error) as e:
        # an empty, truncated or footer-less file: rosbags' ReaderError ("File end magic is invalid")
        raise RecordingFormatError(f"{path}: unreadable ({type(e).__name__}: {e})") from None
    if not targets:
        raise RecordingFormatError(f"{path}: no messages on {m.targets}")
    for topic, rows in ((m.targets, targets), (m.joint_states, states)):
        _check_stamps(path, topic, rows)
    for topic, rows in frames.items():
        _check_stamps(path, topic, rows, values=False)
    return _align(path, contract, m, states, targets, texts, phases, frames)


def _check_stamps(path: Path, topic: str, rows: list, values: bool = True) -> None:
    """A stream's stamps, in the order the messages were recorded, never step back, and a stamp is
    never reused for other values (`values`: rows are (stamp, names, positions)): sorting such a
    stream by stamp would silently run the recording backwards or keep two actions for one tick.
    A message repeated exactly (same stamp, names and values) is dropped."""
    t0 = rows[0][0] if rows else 0.0
    keep = rows[:1]
    for prev, row in zip(rows, rows[1:]):
        if row[0] < prev[0]:
            raise ContractError(f"{path}: {topic} stamps step back {prev[0] - row[0]:.3f} s at {prev[0] - t0:.2f} s "
                                f"into the recording ({prev[0]:.6f} -> {row[0]:.6f}): reordered or replayed messages")
        if row[0] == prev[0] and values:
            if row[1] != prev[1] or not np.array_equal(row[2], prev[2]):
                raise ContractError(f"{path}: {topic} has two messages stamped {row[0]:.6f} ({row[0] - t0:.2f} s "
                                    f"in) with different values: which one is the tick's is unknown")
            continue                                    # an exact repeat
        keep.append(row)
    rows[:] = keep


def _reorder(path: Path, what: str, names: list[str], want: tuple[str, ...], values: np.ndarray) -> np.ndarray:
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ContractError(f"{path}: {what} names {twice} more than once ({len(names)} names); which value is the "
                            f"joint's is unknown")
    missing = [n for n in want if n not in names]
    if missing or len(names) != len(values):
        raise ContractError(f"{path}: {what} lacks joints {missing} (has {names}; the contract needs {list(want)})")
    return values[[names.index(n) for n in want]]


def _newest(stamps: np.ndarray, t: float) -> int:
    return int(np.searchsorted(stamps, t, side="right")) - 1


def _align(path, c: DataContract, m: McapMapping, states, targets, texts, phases, frames) -> ImportedDemo:
    targets.sort(key=lambda r: r[0])
    tt = np.array([r[0] for r in targets])
    streams = {m.joint_states: states, **frames}
    stamps = {}
    for topic, rows in streams.items():
        if not rows:
            raise RecordingFormatError(f"{path}: no messages on {topic}")
        rows.sort(key=lambda r: r[0])
        stamps[topic] = np.array([r[0] for r in rows])
    start = max(float(s[0]) for s in stamps.values())
    ticks = np.flatnonzero(tt >= start)[m.skip_start_ticks:]
    if len(ticks) < 2:
        raise RecordingFormatError(f"{path}: fewer than 2 ticks after every stream started ({start:.3f} s)")
    _check_timing(path, c, m, tt, ticks, stamps)
    prop, act, views, phase, frame_age = [], [], [], [], []
    ptimes, ptexts = np.array([p[0] for p in phases]), [p[1] for p in phases]
    for k in ticks:
        t = tt[k]
        _, tnames, tvals = targets[k]
        act.append(_reorder(path, f"{m.targets} at {t - tt[0]:.2f} s", tnames, c.action_names, tvals))
        i = _newest(stamps[m.joint_states], t)
        _, snames, svals = states[i]
        prop.append(_reorder(path, f"{m.joint_states} at {t - tt[0]:.2f} s", snames, c.state_names, svals))
        row = []
        for topic in m.images:
            j = _newest(stamps[topic], t)
            row.append(frames[topic][j][1])
            frame_age.append(t - stamps[topic][j])
        views.append(np.concatenate(row, axis=1))
        j = _newest(ptimes, t) if len(ptimes) else -1
        label = ptexts[j] if j >= 0 else "manipulation"
        if label not in ("planning", "manipulation"):
            raise ContractError(f"{path}: {m.phase} says {label!r}, expected 'planning' or 'manipulation'")
        phase.append(0 if label == "planning" else 1)
    before = [txt for t, txt in texts if t <= tt[ticks[0]] + 1e-9] or [txt for _, txt in texts]
    if not before:
        raise RecordingFormatError(f"{path}: no instruction on {m.instruction}")

    try:
        instruction = check_instruction(before[-1])
    except ValueError as e:
        raise ContractError(f"{path}: {m.instruction}: {e}") from None
    prop, act = np.asarray(prop, np.float32), np.asarray(act, np.float32)
    c.check_values(f"{path}: {m.joint_states}", prop, "state")
    c.check_values(f"{path}: {m.targets}", act, "action")
    meta = {"suite": c.suite, "task": "imported", "episode": 0, "seed": None, "success": True,
            "recording": path.name, "recording_start_s": round(float(tt[ticks[0]]), 6),
            # how old the frames were at their ticks (a scripted `collect` renders at the tick: 0)
            "frame_age_ms": {"median": round(1e3 * float(np.median(frame_age)), 2),
                             "p90": round(1e3 * float(np.percentile(frame_age, 90)), 2),
                             "max": round(1e3 * float(np.max(frame_age)), 2)}}
    return ImportedDemo(instruction=instruction, stacked=np.stack(views), proprio=prop, actions=act,
                        phase_codes=np.asarray(phase, np.uint8), meta=meta)


# the import's timing tolerances: McapMapping field -> the command line's flag (vam-stack import and record)
TOLERANCE_FLAGS = {"max_gap_ticks": "--max-gap-ticks", "max_age_s": "--max-age-s", "rate_tolerance": "--rate-tolerance"}
TOLERANCE_LIMITS = {"max_gap_ticks": 30.0, "max_age_s": 1.0, "rate_tolerance": 0.5}    # McapMapping's own bounds


def _up(x: float, step: float) -> float:
    """`x` rounded up to a multiple of `step` (a tolerance that takes the value measured, not one digit less)."""
    return round(math.ceil(x / step - 1e-9) * step + 1e-12, 6)


def timing_needs(c: DataContract, m: McapMapping, tt: np.ndarray, ticks: np.ndarray, stamps: dict) -> dict:
    """What the recording's timing measures against each tolerance: {field: (measured, where, what)} for
    max_gap_ticks (the longest pause of the targets, in periods), max_age_s (the oldest state or frame
    at a tick) and rate_tolerance (the mean period's relative distance from the contract's)."""
    period = 1.0 / c.fps
    gaps = np.diff(tt[ticks])
    k = int(gaps.argmax())
    out = {"max_gap_ticks": (float(gaps[k]) / period, float(tt[ticks[k]] - tt[0]),
                             f"{m.targets} pauses {gaps[k]:.3f} s")}
    mean = float(tt[ticks[-1]] - tt[ticks[0]]) / len(gaps)   # (the mean: a timer on a 100 Hz /clock alternates 30 / 40 ms)
    out["rate_tolerance"] = (abs(mean - period) / period if mean > 0 else float("inf"), 0.0,
                             f"{m.targets} runs at {1 / mean if mean > 0 else float('inf'):.2f} Hz (mean period over "
                             f"the recording), the {c.preset} contract at {c.fps:g} Hz")
    worst = (0.0, 0.0, "")
    for topic in (m.joint_states, *m.images):
        s = stamps[topic]
        idx = np.searchsorted(s, tt[ticks], side="right") - 1
        ages = tt[ticks] - s[np.maximum(idx, 0)]
        j = int(ages.argmax())
        if ages[j] > worst[0]:
            worst = (float(ages[j]), float(tt[ticks[j]] - tt[0]), f"{topic} is {ages[j]:.3f} s old")
    out["max_age_s"] = worst
    return out


def accepting(needs: dict) -> dict:
    """The tolerances that take a recording whose timing measures `needs` (timing_needs): each measured
    value rounded up (a pause to half a period, an age to 10 ms, a rate to 1 %); None where it is beyond
    McapMapping's bound."""
    step = {"max_gap_ticks": 0.5, "max_age_s": 0.01, "rate_tolerance": 0.01}
    out = {}
    for f, (v, _, _) in needs.items():
        want = max(_up(v * 1.0001, step[f]), step[f])
        out[f] = want if want <= TOLERANCE_LIMITS[f] else None
    return out


def tolerance_flags(m: McapMapping, needs: dict) -> str | None:
    """The command-line flags that take the recording (only those beyond `m`'s values); None when one
    is beyond its bound."""
    acc = accepting(needs)
    over = {f: v for f, v in acc.items() if needs[f][0] > getattr(m, f)}
    if any(v is None for v in over.values()):
        return None
    return " ".join(f"{TOLERANCE_FLAGS[f]} {v:g}" for f, v in over.items())


def _check_timing(path: Path, c: DataContract, m: McapMapping, tt: np.ndarray, ticks: np.ndarray,
                  stamps: dict) -> None:
    """Refuse (ContractError) a recording whose timing is beyond `m`'s tolerances: a pause of the targets,
    a stale state or frame, a slow rate; the message names the first and the flags that would take it."""
    needs = timing_needs(c, m, tt, ticks, stamps)
    over = [f for f in ("max_gap_ticks", "rate_tolerance", "max_age_s") if needs[f][0] > getattr(m, f)]
    if not over:
        return
    f = over[0]
    v, at, what = needs[f]
    limit = {"max_gap_ticks": f"> {m.max_gap_ticks:g} periods", "max_age_s": f"> max_age_s {m.max_age_s:g}",
             "rate_tolerance": f"off by {100 * v:.0f} % > rate_tolerance {m.rate_tolerance:g}"}[f]
    where = f" at {at:.2f} s into the recording" if f != "rate_tolerance" else ""
    why = {"max_gap_ticks": ": dropped messages or a stalled host", "max_age_s": "", "rate_tolerance": ""}[f]
    flags = tolerance_flags(m, needs)
    if flags:
        take = f"; the import takes it with {flags}"
    else:                                     # one measure is beyond its flag's bound: name that one
        acc = accepting(needs)
        b = next(x for x in ("max_gap_ticks", "rate_tolerance", "max_age_s") if acc[x] is None and needs[x][0] > getattr(m, x))
        take = f"; no tolerance takes it: {needs[b][2]}, beyond what {TOLERANCE_FLAGS[b]} allows ({TOLERANCE_LIMITS[b]:g})"
    raise ContractError(f"{path}: {what}{where} ({limit}){why}{take}")


def import_mcap(source: str | Path, contract: DataContract, out: str | Path, mapping: McapMapping | None = None,
                overwrite: bool = False, progress: Callable[[int, int], None] | None = None,
                task: str | None = None, skip_bad: bool = False) -> dict:
    """Check every recording under `source`, then write them as one dataset at `out`; returns the info.
    `skip_bad`: a recording that fails a check is left out (named with its reason in the info's
    `skipped`) instead of stopping the import; at least one must pass."""
    m = mapping or McapMapping()
    paths = find_recordings(source)
    demos, skipped = [], []
    for i, p in enumerate(paths):      # every recording read and checked, kept as PNG, before anything is written
        try:
            d = read_episode(p, contract, m)
        except (ContractError, RecordingFormatError) as e:
            if not skip_bad:
                raise
            skipped.append({"recording": p.name, "reason": str(e)})
            continue
        d.meta |= {"episode": len(demos)} | ({"task": task} if task else {})
        enc = encode_demo(d)
        enc.meta |= {k: v for k, v in d.meta.items() if k not in enc.meta}
        demos.append(enc)
        if progress is not None:
            progress(i + 1, len(paths))
    if not demos:
        raise RecordingFormatError(f"{source}: every one of the {len(paths)} recordings failed a check; the first: "
                                   f"{skipped[0]['recording']}: {skipped[0]['reason']}")
    source_info = {"format": "rosbag2 MCAP", "root": str(Path(source).resolve()), "recordings": len(paths),
                   "skipped": skipped,
                   "topics": {"state": m.joint_states, "action": m.targets, "images": list(m.images),
                              "instruction": m.instruction, "phase": m.phase}}
    return write_imported(demos, contract, out, source_info, overwrite=overwrite)
