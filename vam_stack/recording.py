"""rosbag2 recordings in MCAP storage, written with `rosbags` (no rclpy needed).

`McapRecorder` writes messages on the topics of `vam_stack.topics` with their message types
and QoS profiles, so the file plays back onto the live stack's topics (`ros2 bag play`) and
Foxglove opens it directly.

Layout: a path ending in `.mcap` gives ONE self-contained MCAP file (rosbags stores the
rosbag2 metadata inside it; readers that want a bag directory can run `ros2 bag reindex`);
any other path gives a rosbag2 bag directory (`metadata.yaml` + `<name>.mcap`). Messages are
chunk-compressed with zstd by default (camera frames dominate the size).

Crash safety: the file is written in place (no staging copy) and every chunk goes to disk as
it closes: when its uncompressed size passes 1 MiB, when `flush_every_s` of wall time has
passed since the last one, and at `flush()` (the runners flush after every episode). A
process killed with SIGKILL therefore leaves a file whose chunks up to the last closed one
are complete; it has no summary section or footer, so index-based readers (rosbags,
`ros2 bag info`) refuse it, while a sequential reader (`mcap.stream_reader.StreamReader`,
`mcap recover recording.mcap -o fixed.mcap`) reads every message of the complete chunks.
`stop_on_signals()` turns SIGTERM (and SIGINT) into `Interrupted` on the main thread, never
inside a write, so the recorder's `with` block closes the file properly on either signal.

Timestamps: every `write*` call takes `t_s`, seconds since the recorder's `origin_s`
(default: the wall clock when the recorder was created; pass 0.0 for a bag that starts at the
epoch). The same absolute time goes into the bag's log time and, for stamped messages, into
`header.stamp`, so `ros2 bag play --clock` publishes a consistent /clock.
"""
from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness, QosReliability,
                                QosTime)
from rosbags.rosbag2 import CompressionFormat, CompressionMode, Reader, StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import McapWriter, PendingChunk, version, write_record, write_string, zstd

from vam_stack import image_msgs, msg_base, msgs
from vam_stack.topics import QosSpec, Topic, resolve

ROSBAG2_VERSION = 8  # rosbag2 metadata version written (rosbags writes 8 or 9; 8 is older)


class RecordingError(RuntimeError):
    """The recorder was misused (closed, wrong type for a topic, bad path or time)."""


# -- signals: a stop request never lands inside a write ---------------------------------------

class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived (see `stop_on_signals`); `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_main_writes = 0                 # recorder writes in progress on the main thread
_pending_signal: int | None = None


@contextlib.contextmanager
def _write_section() -> Iterator[None]:
    """A recorder write: a stop signal arriving inside it is raised when it is over (main thread)."""
    global _main_writes, _pending_signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _main_writes += 1
    try:
        yield
    finally:
        _main_writes -= 1
    if _main_writes == 0 and _pending_signal is not None:
        signum, _pending_signal = _pending_signal, None
        raise Interrupted(signum)


def _stop_handler(signum: int, frame: Any) -> None:
    global _pending_signal
    if _main_writes:             # finish the write first; `_write_section` raises on its way out
        _pending_signal = signum
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def stop_on_signals(signums: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Within the block, each of `signums` raises `Interrupted` (a KeyboardInterrupt) on the main
    thread, so `with` blocks unwind and close their recorders; a signal arriving during a recorder
    write is raised when the write is done (a half-written record would spoil the chunk). The
    previous handlers come back on exit. Off the main thread (where Python cannot install
    handlers) this does nothing."""
    global _pending_signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _stop_handler) for s in signums}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _pending_signal = None


# -- rosbags' MCAP storage, in place and flushed per chunk -------------------------------------

class _FlushedMcap(McapWriter):
    """rosbags' MCAP storage that puts every chunk on disk as it closes."""

    def close_chunk(self) -> None:
        super().close_chunk()
        self.bio.flush()

    def flush(self) -> None:
        """Close the pending chunk now (if it holds anything) and put it on disk."""
        if self.chunk.bio.tell():
            self.close_chunk()


class _McapFile(_FlushedMcap):
    """The same storage writing the file `path` itself (rosbags' own writes <dir>/<dir name>.mcap)."""

    def __init__(self, path: Path, compression: CompressionMode) -> None:  # noqa: D107
        # rosbags' McapWriter.__init__ with the file named directly
        self.path = path
        self.bio = path.open("xb")
        self.bio.write(b"\x89MCAP\x30\r\n")
        rec = BytesIO()
        write_string(rec, "ros2")
        write_string(rec, f"rosbags-{version('rosbags')}")
        write_record(self.bio, 0x01, rec)
        self.bio.flush()
        self.schemas, self.channels, self.chunks = [], [], []
        self.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))
        if compression == CompressionMode.STORAGE:
            self.compression, self.compressor = "zstd", zstd.compress
        else:
            self.compression, self.compressor = "", (lambda x: x)
        self.message_start_time = 2**63 - 1
        self.message_end_time = 0
        self.channel_stats = {}


class _Writer(Writer):
    """rosbags' rosbag2 writer on the storage above: a bag directory as rosbags lays it out, or
    (`single_file`) one MCAP file written where it is named."""

    STORAGE_PLUGINS = {**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: _FlushedMcap}

    def __init__(self, path: Path, single_file: bool) -> None:
        super().__init__(path, version=ROSBAG2_VERSION, storage_plugin=StoragePlugin.MCAP)
        self.single_file = single_file

    def open(self) -> None:
        if not self.single_file:
            super().open()
            return
        try:
            self.storage = _McapFile(self.path, self.compression_mode)
        except FileExistsError:
            raise RecordingError(f"{str(self.path)!r} exists already") from None

    def close(self) -> None:
        if not self.single_file:
            super().close()
            return
        # the metadata goes into the MCAP; rosbags also writes a metadata.yaml beside the bag,
        # which a single file has no place for: it goes to a scratch folder and is dropped
        scratch = Path(tempfile.mkdtemp(prefix="vam-mcap-metadata-"))
        self.metapath = scratch / "metadata.yaml"
        try:
            super().close()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def rosbag2_qos(spec: QosSpec) -> Qos:
    """A QosSpec as rosbag2's offered_qos_profiles entry."""
    zero = QosTime(0, 0)
    return Qos(
        history=QosHistory.KEEP_LAST, depth=spec.depth,
        reliability=(QosReliability.RELIABLE if spec.reliability == "reliable"
                     else QosReliability.BEST_EFFORT),
        durability=(QosDurability.TRANSIENT_LOCAL if spec.durability == "transient_local"
                    else QosDurability.VOLATILE),
        deadline=zero, lifespan=zero, liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=zero, avoid_ros_namespace_conventions=False)


class McapRecorder:
    """Write a rosbag2 MCAP recording; use as a context manager.

    >>> with McapRecorder(out / "recording.mcap") as rec:
    ...     rec.write_image("stacked_image", frame, t_s=0.05)
    ...     rec.write_telemetry(replan_telemetry, t_s=0.05)

    The file is finalised on every exit path (an exception inside the `with` block still
    leaves a readable recording of what was written before it) and written in place, a chunk
    at a time (see the module docstring: what a SIGKILL leaves). `overwrite=True` removes an
    existing file or bag directory at `path` when the recorder is created, so create it only
    after every check that can fail has passed. `flush_every_s` bounds the wall time a written
    message waits in memory before its chunk goes to disk. Writes are serialised by a lock, so
    callbacks on several threads may share one recorder.
    """

    def __init__(self, path: str | Path, *, origin_s: float | None = None,
                 compress: bool = True, overwrite: bool = False, flush_every_s: float = 2.0) -> None:
        self.path = Path(path)
        self.single_file = self.path.suffix == ".mcap"
        self.origin_s = time.time() if origin_s is None else origin_s
        self.origin_ns = msg_base.seconds_to_ns(self.origin_s)  # validates
        self.compress = compress
        if (isinstance(flush_every_s, bool) or not isinstance(flush_every_s, (int, float))
                or not 0 < flush_every_s < float("inf")):
            raise RecordingError(f"flush_every_s must be a finite number of seconds > 0, got {flush_every_s!r}")
        self.flush_every_s = float(flush_every_s)
        self._last_flush = time.monotonic()
        if self.path.exists():
            if not overwrite:
                raise RecordingError(
                    f"{str(self.path)!r} exists; pass overwrite=True to replace it")
            if self.path.is_dir():
                shutil.rmtree(self.path)
            else:
                self.path.unlink()
        self._writer: _Writer | None = None
        self._connections: dict[str, Any] = {}
        self._topics: dict[str, Topic] = {}
        self.counts: Counter[str] = Counter()  # topic name -> messages written
        self.closed = False
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> "McapRecorder":
        if self._writer is not None or self.closed:
            raise RecordingError(f"recorder for {str(self.path)!r} was already opened")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        writer = _Writer(self.path, self.single_file)
        if self.compress:
            writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        writer.open()
        self._writer = writer
        self._last_flush = time.monotonic()
        return self

    def flush(self) -> None:
        """Close the chunk being filled and put it on disk (what a SIGKILL after this keeps)."""
        with _write_section(), self._lock:
            if self._writer is None:
                return
            self._writer.storage.flush()
            self._last_flush = time.monotonic()

    def close(self) -> None:
        """Finalise the file (idempotent)."""
        with _write_section(), self._lock:
            if self.closed or self._writer is None:
                self.closed = True
                return
            writer, self._writer = self._writer, None
            self.closed = True
            writer.close()

    def __enter__(self) -> "McapRecorder":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------
    def _connection(self, key_or_name: str, msgtype: str) -> tuple[Any, Topic]:
        if self._writer is None:
            raise RecordingError(
                f"recorder for {str(self.path)!r} is {'closed' if self.closed else 'not open'}")
        t = resolve(key_or_name)
        if t.msgtype != msgtype:
            raise RecordingError(f"topic {t.name} carries {t.msgtype}, got a {msgtype}")
        conn = self._connections.get(t.name)
        if conn is None:
            conn = self._writer.add_connection(
                t.name, t.msgtype, typestore=msgs.typestore(),
                offered_qos_profiles=[rosbag2_qos(t.qos_spec)])
            self._connections[t.name] = conn
            self._topics[t.name] = t
        return conn, t

    def stamp_ns(self, t_s: float) -> int:
        """Absolute time in nanoseconds of a time `t_s` (seconds) relative to the origin."""
        if isinstance(t_s, bool) or not isinstance(t_s, (int, float, np.floating, np.integer)):
            raise RecordingError(f"t_s must be seconds since the origin, got {t_s!r}")
        if not np.isfinite(t_s) or t_s < 0:
            raise RecordingError(f"t_s must be finite and >= 0, got {t_s!r}")
        return self.origin_ns + msg_base.seconds_to_ns(t_s)

    def stamp(self, t_s: float) -> Any:
        """builtin_interfaces/Time of origin + `t_s`, for message headers."""
        return msgs.time_from_ns(self.stamp_ns(t_s))

    def write(self, topic: str, msg: Any, t_s: float) -> None:
        """Write a ready message on `topic` (table key or name) at origin + `t_s`."""
        self.write_raw(topic, msg_base.msgtype_of(msg), msgs.serialize(msg), self.stamp_ns(t_s))

    def write_raw(self, topic: str, msgtype: str, data: bytes, t_ns: int) -> None:
        """Write an already serialised (CDR) message of `msgtype` on `topic` at absolute time `t_ns`
        (what a recorder node receives from a raw subscription, as `ros2 bag record` stores it)."""
        if isinstance(t_ns, bool) or not isinstance(t_ns, (int, np.integer)) or t_ns < 0:
            raise RecordingError(f"t_ns must be a non-negative integer of nanoseconds, got {t_ns!r}")
        with _write_section(), self._lock:
            conn, _ = self._connection(topic, msgtype)
            self._writer.write(conn, int(t_ns), bytes(data))
            self.counts[conn.topic] += 1
            if time.monotonic() - self._last_flush >= self.flush_every_s:
                self._writer.storage.flush()
                self._last_flush = time.monotonic()

    def frame_id(self, topic: str) -> str:
        return resolve(topic).frame_id

    def write_image(self, topic: str, image: np.ndarray, t_s: float,
                    encoding: str = "rgb8") -> None:
        self.write(topic, image_msgs.image_msg(image, self.stamp(t_s), self.frame_id(topic),
                                         encoding), t_s)

    def write_joint_state(self, topic: str, names: Sequence[str], position: Any, t_s: float,
                          velocity: Any = None, effort: Any = None) -> None:
        self.write(topic, msgs.joint_state_msg(names, position, velocity, effort,
                                               self.stamp(t_s), self.frame_id(topic)), t_s)

    def write_float32(self, topic: str, value: float, t_s: float) -> None:
        self.write(topic, msgs.float32_msg(value), t_s)

    def write_string(self, topic: str, text: str, t_s: float) -> None:
        self.write(topic, msgs.string_msg(text), t_s)

    def write_json(self, topic: str, obj: Any, t_s: float) -> None:
        self.write(topic, msgs.json_msg(obj), t_s)

    def write_diagnostics(self, statuses: Any, t_s: float) -> None:
        self.write("diagnostics", msgs.diagnostic_array_msg(statuses, self.stamp(t_s)), t_s)

    def write_telemetry(self, telemetry: Mapping[str, Any], t_s: float,
                        phase: str | None = None) -> None:
        """One replan's telemetry: TR, TR_0, s, weights, latency, TR per Euler step, JSON.

        A value that is None or NaN is unknown (TR_0 under the `none`/`flat` schedules, which
        set no baseline): nothing goes on its Float32 topic and the JSON holds null. The JSON
        copy keeps the keys of `TELEMETRY_JSON_KEYS` (no attention map, no action chunk).
        `phase` goes on /vam/phase. Everything is checked before anything is written.
        """
        missing = [k for k in TELEMETRY_SCALARS if k not in telemetry]
        if missing:
            raise RecordingError(f"telemetry lacks {missing}; has {sorted(telemetry)}")
        values = {k: msgs.float32_msg(telemetry[k]) for k in TELEMETRY_SCALARS
                  if not _unknown(telemetry[k])}
        tr_steps = telemetry.get("tr_steps")
        steps_msg = (msgs.float32_array_msg(tr_steps, ["euler_step"])
                     if tr_steps is not None and len(tr_steps) > 0 else None)
        json_msg = msgs.json_msg({k: json_ready(telemetry[k]) for k in TELEMETRY_JSON_KEYS
                                  if k in telemetry})
        phase_msg = msgs.string_msg(phase) if phase is not None else None
        for k, m in values.items():
            self.write(k, m, t_s)
        if steps_msg is not None:
            self.write("tr_steps", steps_msg, t_s)
        self.write("telemetry", json_msg, t_s)
        if phase_msg is not None:
            self.write("phase", phase_msg, t_s)


TELEMETRY_SCALARS = ("tr", "tr0", "s", "w_lang", "w_plan", "latency_ms")  # Float32 topics
TELEMETRY_JSON_KEYS = ("step", "replan", "tr", "tr_steps", "tr0", "s", "s_steps", "w_lang",
                       "w_plan", "branches_computed", "latency_ms", "timing_ms", "sigma_v", "guidance")


def _unknown(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and np.isnan(v))


def json_ready(v: Any) -> Any:
    """`v` ready for JSON (the one cleaner: recordings' and the policy node's telemetry): arrays
    become lists, NaN and +-inf (unknown) null, recursively through lists, tuples and dicts."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [json_ready(x) for x in v]
    if isinstance(v, dict):
        return {k: json_ready(x) for k, x in v.items()}
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return None
    return v


# -- reading (tests, tools) ------------------------------------------------------------------

@dataclass
class RecordingInfo:
    """What a recording holds."""

    topics: dict[str, str]  # topic name -> message type
    counts: dict[str, int]  # topic name -> message count
    start_ns: int
    end_ns: int

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) * 1e-9


def read_info(path: str | Path) -> RecordingInfo:
    """Topics, message types and counts of a recording (file or bag directory)."""
    with Reader(Path(path)) as reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        counts: Counter[str] = Counter()
        for conn, _, _ in reader.messages():
            counts[conn.topic] += 1
        return RecordingInfo(topics, dict(counts), reader.start_time, reader.end_time)


def read_messages(path: str | Path,
                  topics: Sequence[str] | None = None) -> Iterator[tuple[str, int, Any]]:
    """Yield (topic name, log time ns, deserialised message), in time order."""
    with Reader(Path(path)) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        for conn, t_ns, raw in reader.messages(connections=conns):
            yield conn.topic, t_ns, msgs.deserialize(raw, conn.msgtype)
