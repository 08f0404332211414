"""Episodes of the running ROS graph into MCAP, one file per episode (the `demo_recorder` node's core).

The node hands every message it receives, still serialised, to `EpisodeRecorder.on_message`;
between `start` and `stop` they go into `<out_dir>/<prefix>_<NNN>.mcap` (rosbag2 MCAP through
`vam_stack.recording.McapRecorder`, flushed chunk by chunk, so a killed recorder leaves what was
written). The newest message of each latched topic (the instruction, the phase) is kept while
idle and written first when an episode starts, as a late-joining `ros2 bag record` would
receive it. `discard` closes and deletes the episode being recorded (a failed demonstration).
A recording is never overwritten: the next free index is used.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from vam_stack.config import check
from vam_stack.recording import McapRecorder
from vam_stack.topics import resolve

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
            return path

    def on_message(self, topic: str, msgtype: str, data: bytes, t_ns: int) -> None:
        with self._lock:
            if topic in self.latched:
                self._kept[topic] = (msgtype, bytes(data), t_ns)
            if self._rec is None:
                return
            self._rec.write_raw(topic, msgtype, data, t_ns)
            overdue = self.clock() - self._started > self.cfg.max_episode_s
        if overdue:
            self.stop()

    def stop(self) -> dict:
        """Close the episode; returns its file and message counts (an empty dict when idle)."""
        with self._lock:
            rec, self._rec = self._rec, None
            if rec is None:
                return {}
            rec.close()
            self.episodes += 1
            return {"path": str(rec.path), "messages": dict(rec.counts),
                    "duration_s": round(self.clock() - self._started, 3)}

    def discard(self) -> str | None:
        """Close and delete the episode being recorded; returns the deleted path (None when idle)."""
        with self._lock:
            rec, self._rec = self._rec, None
            if rec is None:
                return None
            rec.close()
            rec.path.unlink(missing_ok=True)
            return str(rec.path)
