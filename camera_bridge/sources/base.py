"""The camera interface: connect / read_latest(max_age_ms) / close, plus reconnection.

Every source delivers `Frame`s stamped on the host's monotonic clock (seconds), so views of
different cameras can be compared. Subclasses implement `_open`, `_poll` and `_release`;
this base class adds freshness checks, frame-drop counting and automatic reopening of a
camera that stopped delivering, paced by deadlines on the injected clock.
"""
from __future__ import annotations

import abc
import collections
import logging
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from camera_bridge.config import CameraConfig
from vam_stack.refusals import RefusalLog

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True)
class Frame:
    """One image of one camera."""

    camera: str  # view name from the config
    image: np.ndarray  # [H, W, C] as delivered (expected uint8 [H, W, 3])
    encoding: str  # pixel layout the source reports ("bgr8", "rgb8", "mono8", ...)
    stamp_s: float  # capture time on the host monotonic clock, seconds
    seq: int  # source frame counter (hardware frame number where the device has one)
    device_stamp_ms: float | None = None  # raw device timestamp, when the device has a clock


class CameraError(RuntimeError):
    """A camera problem; `camera` names the view, the message says what happened."""

    def __init__(self, camera: str, message: str):
        super().__init__(f"camera {camera!r}: {message}")
        self.camera = camera
        self.detail = message


class CameraDisconnected(CameraError):
    """The camera is not open (never opened, lost, end of file); reopening is attempted."""


class EndOfStream(CameraDisconnected):
    """A finite source (video file, recording) ended; it is not reopened automatically."""


class NoFrameYet(CameraError):
    """Connected, but the first frame has not arrived."""


class FrameStale(CameraError):
    """The newest frame is older than the allowed age."""

    def __init__(self, camera: str, age_ms: float, max_age_ms: float):
        super().__init__(camera, f"stale: newest frame is {age_ms:.0f} ms old (max {max_age_ms:.0f} ms)")
        self.age_ms = age_ms


@dataclass
class SourceStats:
    """Counters a source exposes for diagnostics."""

    frames: int = 0  # distinct frames received since construction
    dropped: int = 0  # frames skipped according to the source's frame counter
    reconnects: int = 0  # successful reopenings after a loss
    last_error: str = ""  # newest problem, empty when none happened yet
    measured_fps: float = 0.0  # rate of distinct frames over the last ~second
    bad_stamps: int = 0  # frames refused for a non-finite capture stamp, or one ahead of the host clock


class CameraSource(abc.ABC):
    """Base of all sources; use as a context manager or call connect()/close()."""

    def __init__(self, cfg: CameraConfig, clock: Clock = time.monotonic):
        self.cfg = cfg
        self.clock = clock
        self.stats = SourceStats()
        self._connected = False
        self._latest: Frame | None = None
        self._last_new_at = 0.0  # host time the newest distinct frame arrived
        self._next_attempt_at = 0.0  # deadline of the next reopen attempt
        self._ever_connected = False
        self._arrivals: collections.deque[float] = collections.deque(maxlen=64)
        self._refused_since_new = 0  # frames refused (stamped ahead) since the newest accepted one
        self._refusals = RefusalLog(log, f"camera {cfg.name!r}: frame", "warning", clock=time.monotonic)

    @property
    def stamps_on_host_clock(self) -> bool:
        """Whether capture stamps are instants of the host clock (then one ahead of it is a lie and
        refused). A replay that steps through a file faster than real time stamps frames on the
        file's own time line, ahead of the host clock by design."""
        return True

    # ---- subclass hooks -------------------------------------------------------------
    @abc.abstractmethod
    def _open(self) -> None:
        """Open the device; raise CameraError (or CameraDisconnected) with the reason."""

    @abc.abstractmethod
    def _poll(self) -> Frame | None:
        """Newest frame if one arrived since the last call, else None. Must not block."""

    @abc.abstractmethod
    def _release(self) -> None:
        """Release the device; must not raise."""

    def next_frame_due(self) -> float | None:
        """When (on this source's clock) a frame newer than the last one read will exist, for a source
        that knows its schedule (a synthetic or simulated camera); None: unknown, poll."""
        return None

    # ---- public interface -----------------------------------------------------------
    @property
    def name(self) -> str:
        return self.cfg.name

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        """Open the camera; raises CameraError naming the camera when it cannot."""
        if self._connected:
            return
        try:
            self._open()
        except CameraError as e:
            self._release()
            self.stats.last_error = e.detail
            raise
        except Exception as e:  # SDK errors (RuntimeError from pyrealsense2, cv2.error)
            self._release()
            self.stats.last_error = f"open failed: {e}"
            raise CameraDisconnected(self.name, f"open failed: {e}") from e
        if self._ever_connected:
            self.stats.reconnects += 1
        self._ever_connected = True
        self._connected = True
        self._last_new_at = self.clock()
        self._latest = None

    def close(self) -> None:
        """Release the camera (idempotent)."""
        if self._connected:
            self._release()
        self._connected = False

    def __enter__(self) -> "CameraSource":
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read_latest(self, max_age_ms: float | None = None) -> Frame:
        """Newest frame, or a CameraError saying why there is none fresh enough.

        A disconnected camera is reopened here (at most every `reconnect_interval_s`); a
        connected one that delivered nothing for `reconnect_after_ms` is closed and reopened.
        """
        max_age = self.cfg.max_age_ms if max_age_ms is None else float(max_age_ms)
        now = self.clock()
        if not self._connected:
            self._try_reconnect(now)
        frame = None
        try:
            frame = self._poll()
        except CameraDisconnected as e:
            self._lose(now, e.detail, retry=not isinstance(e, EndOfStream))
            raise
        except CameraError:
            raise
        except Exception as e:  # SDK/driver error while reading (e.g. device unplugged): reopen
            self._lose(now, f"read failed: {type(e).__name__}: {e}")
            raise CameraDisconnected(self.name, self.stats.last_error) from e
        if frame is not None:
            # the frame arrived when the read returned: a read that takes long (a simulator stepping its
            # physics to the present and rendering, a frozen CPU) made a fresh frame look ahead of a
            # clock read before it (the MuJoCo graph refused 1-4 frames a minute, 43-106 ms "ahead")
            now = self.clock()
        if frame is not None and self._ahead(frame, now):
            frame = None                     # refused by itself: the frames before it stay in use
        if frame is not None:
            self._accept(frame, now)
        elif (now - self._last_new_at) * 1000.0 > self.cfg.reconnect_after_ms:
            self._lose(now, f"no frame for {(now - self._last_new_at) * 1000.0:.0f} ms; reopening")
            raise CameraDisconnected(self.name, self.stats.last_error)
        if self._latest is None:
            raise NoFrameYet(self.name, "connected, waiting for the first frame")
        # never fresher than the host's own arrival time says: a device clock that lies (ahead of the
        # host's) cannot keep a stopped camera's frame "fresh"; non-finite stamps are refused on arrival
        age_ms = max(now - self._latest.stamp_s, now - self._last_new_at) * 1000.0
        if age_ms > max_age:
            stale = FrameStale(self.name, age_ms, max_age)
            if self._refused_since_new:          # say why nothing new came: its frames were refused
                stale.detail += f"; {self._refused_since_new} newer frame(s) refused, the latest: {self.stats.last_error}"
                stale.args = (f"camera {self.name!r}: {stale.detail}",)
            raise stale
        return self._latest

    def _ahead(self, frame: Frame, now: float) -> bool:
        """Whether `frame` is stamped ahead of the host clock by more than one frame period (a
        producer's clock ahead, a bad stamp): refused by itself, counted, logged rate-limited. Kept,
        it would pass every freshness check until real time caught up with it, and the
        synchroniser, which takes only frames newer than the newest it holds, would wait as long
        for this camera (+5 s: the stacked window unavailable for 6.6 s)."""
        ahead = frame.stamp_s - now
        if not self.stamps_on_host_clock or not ahead > 1.0 / self.cfg.fps:   # NaN stamps: refused by _accept
            return False
        self.stats.bad_stamps += 1
        self._refused_since_new += 1
        self.stats.last_error = (f"frame {frame.seq} refused: capture stamp {frame.stamp_s:.6f} is {ahead:.3f} s "
                                 f"ahead of the host clock ({now:.6f})")
        self._refusals.refuse(self.stats.last_error)
        return True

    # ---- helpers --------------------------------------------------------------------
    def _try_reconnect(self, now: float) -> None:
        if now < self._next_attempt_at:
            wait = self._next_attempt_at - now
            when = "not reopened" if wait == float("inf") else f"next attempt in {wait:.1f} s"
            raise CameraDisconnected(self.name, f"{self.stats.last_error or 'not connected'} ({when})")
        self._next_attempt_at = now + self.cfg.reconnect_interval_s
        self.connect()  # raises CameraError with the reason when the camera is still away

    def _lose(self, now: float, reason: str, retry: bool = True) -> None:
        self.stats.last_error = reason
        self.close()
        # First reopen attempt on the next read; a finished file is never reopened by itself.
        self._next_attempt_at = now if retry else float("inf")

    def _accept(self, frame: Frame, now: float) -> None:
        if not math.isfinite(frame.stamp_s):
            self.stats.bad_stamps += 1
            self.stats.last_error = f"frame {frame.seq} refused: capture stamp {frame.stamp_s!r} is not finite"
            raise CameraError(self.name, self.stats.last_error)
        prev = self._latest
        if prev is not None and frame.seq > prev.seq + 1:
            self.stats.dropped += frame.seq - prev.seq - 1
        self._latest = frame
        self._last_new_at = now
        self._refused_since_new = 0
        self.stats.frames += 1
        self._arrivals.append(now)
        while self._arrivals and now - self._arrivals[0] > 1.0:
            self._arrivals.popleft()
        if len(self._arrivals) >= 2:
            span = self._arrivals[-1] - self._arrivals[0]
            self.stats.measured_fps = (len(self._arrivals) - 1) / span if span > 0 else 0.0


class ClockMapper:
    """Map a device clock (ms) onto the host monotonic clock (s) with a running minimum.

    Each frame gives `arrival - device_time` = offset + transport latency (>= 0). The minimum
    over recent frames estimates the offset without the latency jitter, so mapped stamps keep
    the hardware timestamps' precision. A device clock that jumps backwards (device restart)
    or by more than `reset_after_s` resets the estimate.
    """

    def __init__(self, window: int = 300, reset_after_s: float = 2.0):
        self._samples: collections.deque[float] = collections.deque(maxlen=window)
        self._last_device_s: float | None = None
        self.reset_after_s = reset_after_s

    def reset(self) -> None:
        self._samples.clear()
        self._last_device_s = None

    def map(self, device_ms: float, arrival_s: float) -> float:
        """Host time of a frame the device stamped `device_ms`; a non-finite device stamp is a
        ValueError and leaves the estimate untouched (one NaN would make every later stamp NaN)."""
        if not (math.isfinite(device_ms) and math.isfinite(arrival_s)):
            raise ValueError(f"device timestamp {device_ms!r} ms (arrival {arrival_s!r} s) is not finite")
        device_s = device_ms / 1000.0
        last = self._last_device_s
        if last is not None and (device_s < last or device_s - last > self.reset_after_s):
            self._samples.clear()
        self._last_device_s = device_s
        self._samples.append(arrival_s - device_s)
        return device_s + min(self._samples)
