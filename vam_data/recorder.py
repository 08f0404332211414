"""Episodes of the running ROS graph into MCAP, one file per episode (the `demo_recorder` node's core).

The node hands every message it receives, still serialised, to `EpisodeRecorder.on_message`;
between `start` and `stop` they go into `<out_dir>/<prefix>_<NNN>.mcap` (rosbag2 MCAP through
`vam_stack.recording.McapRecorder`, flushed chunk by chunk, so a killed recorder leaves what was
written). The newest message of each latched topic (the instruction, the phase) is kept while
idle and written first when an episode starts, as a late-joining `ros2 bag record` would
receive it. `discard` closes and deletes the episode being recorded (a failed demonstration).
A recording is never overwritten: the next free index is used.

Joint states the driver could not read: the driver publishes a joint it could not read this tick
as NaN on /joint_states (the ROS convention for an unknown value). The recorder counts, per
joint, the messages of the episode that carry one, and marks such an episode: `stop` answers
with `unreadable_joints` and writes, as the episode's last message, a /diagnostics status
`demo_recorder: episode` at ERROR naming each joint and how many states lacked it (what rqt,
Foxglove and a reader of the file see); the import then refuses those steps, naming the joint.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vam_stack import msgs
from vam_stack.config import check
from vam_stack.recording import McapRecorder
from vam_stack.topics import resolve

STATE_TOPIC, STATE_TYPE = "/joint_states", "sensor_msgs/msg/JointState"   # what the driver publishes
DEFAULT_TOPICS = ("/joint_states,/teleop/joint_command,/vam/joint_targets,/camera/stacked/image_raw,"
                  "/vam/instruction,/vam/phase")


@dataclass(frozen=True)
class RecorderConfig:
    """What the demo recorder writes, and where."""

    out_dir: str = "runs/recordings"      # folder of the episode files (created when the first episode starts)
    prefix: str = "episode"               # file names: <prefix>_<NNN>.mcap, NNN the next free index
    topics: str = DEFAULT_TOPICS          # comma-separated topic names to record (rows of the topic table)
    max_episode_s: float = 600.0          # an episode still recording after this long is stopped and kept [s]

    def __post_init__(self):
        check(bool(self.out_dir.strip()), f"recorder: out_dir must not be empty, got {self.out_dir!r}")
        check(self.prefix.replace("_", "").replace("-", "").isalnum(),
              f"recorder: prefix must be letters, digits, '_' or '-', got {self.prefix!r}")
        names = self.topic_names
        check(len(names) >= 1 and len(set(names)) == len(names),
              f"recorder: topics must be distinct topic names, got {self.topics!r}")
        for n in names:
            try:
                resolve(n)
            except KeyError as e:
                raise ValueError(f"recorder: topic {n!r} is not in the topic table ({e.args[0]})") from None
        check(1.0 <= self.max_episode_s <= 3600.0, f"recorder: max_episode_s must be in [1, 3600], got "
                                                   f"{self.max_episode_s!r}")

    @property
    def topic_names(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.topics.split(",") if t.strip())


class EpisodeRecorder:
    """Start / stop / discard episodes; thread-safe (callbacks may arrive on several threads)."""

    def __init__(self, cfg: RecorderConfig, latched: set[str] = frozenset(), clock=time.monotonic):
        self.cfg, self.latched, self.clock = cfg, set(latched), clock
        self._lock = threading.Lock()
        self._rec: McapRecorder | None = None
        self._kept: dict[str, tuple[str, bytes, int]] = {}
        self._started = 0.0
        self.episodes = 0
        self._states = 0                      # /joint_states messages of the episode being recorded
        self._unreadable: Counter[str] = Counter()   # joint -> those of them with that joint NaN
        self._last_ns = 0

    @property
    def recording(self) -> bool:
        return self._rec is not None

    def _next_path(self) -> Path:
        out = Path(self.cfg.out_dir)
        taken = {p.name for p in out.glob(f"{self.cfg.prefix}_*.mcap")} if out.is_dir() else set()
        i = 0
        while f"{self.cfg.prefix}_{i:03d}.mcap" in taken:
            i += 1
        return out / f"{self.cfg.prefix}_{i:03d}.mcap"

    def start(self, t_ns: int) -> Path:
        with self._lock:
            if self._rec is not None:
                raise RuntimeError(f"already recording {self._rec.path}")
            path = self._next_path()
            rec = McapRecorder(path, origin_s=0.0).open()
            for topic, (msgtype, data, _) in self._kept.items():
                rec.write_raw(topic, msgtype, data, t_ns)
            self._rec, self._started = rec, self.clock()
            self._states, self._unreadable, self._last_ns = 0, Counter(), t_ns
            return path

    def on_message(self, topic: str, msgtype: str, data: bytes, t_ns: int) -> None:
        with self._lock:
            if topic in self.latched:
                self._kept[topic] = (msgtype, bytes(data), t_ns)
            if self._rec is None:
                return
            self._rec.write_raw(topic, msgtype, data, t_ns)
            self._last_ns = max(self._last_ns, t_ns)
            if topic == STATE_TOPIC and msgtype == STATE_TYPE:
                self._note_state(data)
            overdue = self.clock() - self._started > self.cfg.max_episode_s
        if overdue:
            self.stop()

    def _note_state(self, data: bytes) -> None:
        """Count the joints a /joint_states message carries as NaN (unread by the driver)."""
        self._states += 1
        try:
            js = msgs.deserialize(data, STATE_TYPE)
        except Exception:                      # an undecodable message is written as received, not judged
            return
        position = np.asarray(js.position, np.float64)
        if position.shape == (len(js.name),):
            self._unreadable.update(n for n, v in zip(js.name, position) if np.isnan(v))

    def unreadable_summary(self) -> str:
        """'left_joint2 in 12 of 300 /joint_states, ...' for the episode being recorded ('' when none)."""
        return ", ".join(f"{n} in {c} of {self._states} {STATE_TOPIC}" for n, c in sorted(self._unreadable.items()))

    def stop(self) -> dict:
        """Close the episode; returns its file and message counts (an empty dict when idle), and
        `unreadable_joints` ({joint: states without it}) when the driver could not read a joint: the
        episode is then marked in the file (module docstring)."""
        with self._lock:
            rec, self._rec = self._rec, None
            if rec is None:
                return {}
            if self._unreadable:
                text = self.unreadable_summary()
                rec.write_raw("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", msgs.serialize(
                    msgs.diagnostic_array_msg([msgs.diagnostic_status(
                        "demo_recorder: episode", {n: c for n, c in sorted(self._unreadable.items())}, level="error",
                        message=f"joints the driver could not read (NaN): {text}")], self._last_ns * 1e-9)),
                    self._last_ns)
            rec.close()
            self.episodes += 1
            out = {"path": str(rec.path), "messages": dict(rec.counts),
                   "duration_s": round(self.clock() - self._started, 3)}
            if self._unreadable:
                out["unreadable_joints"] = dict(sorted(self._unreadable.items()))
                out["joint_states"] = self._states
            return out

    def discard(self) -> str | None:
        """Close and delete the episode being recorded; returns the deleted path (None when idle)."""
        with self._lock:
            rec, self._rec = self._rec, None
            if rec is None:
                return None
            rec.close()
            rec.path.unlink(missing_ok=True)
            return str(rec.path)
