"""The camera bridge: read, check, synchronise, resize, stack and buffer; cut windows.

`CameraBridge.tick()` does one round: read every camera's newest frame, reject stale,
missing, wrong-size and wrong-encoding frames (naming the camera), match the views by
timestamp, write the matched set as one stacked RGB frame into the ring. `window()` returns
the frame-skip clip or a not-ready result whose reasons name the cameras at fault. Cameras
that fail are reopened by their sources, so a camera that comes back is used again without
a restart; the clip becomes ready once the ring again spans a gap-free window.

`run()` / `start()` drive `tick()` at `tick_hz`, paced by deadlines, with the achieved rate
in `loop_hz`; where every source can say when its next frame is due (`next_frame_due`: the
synthetic and simulated cameras), the loop also wakes at that instant, so a frame waits for no
poll. Each tick that completes a stacked frame hands it to `on_stacked` (a `Stacked`: the frame,
its capture stamp, when its last view reached the host, when it was stacked), in the loop's
thread, before the next tick: whoever publishes does it when the frame is complete, not on a
clock of its own. Everything takes an injectable clock, so tests run on simulated time.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from camera_bridge.config import BridgeConfig
from camera_bridge.preprocess import ViewWriter, frame_problem
from camera_bridge.sources import CameraError, CameraSource, SourceStats, make_source
from camera_bridge.sources.base import Clock
from camera_bridge.sync import Synchroniser
from camera_bridge.window import FrameRing, Window
from vam_control.pacing import DeadlinePacer
from vam_stack.realtime import set_fifo_priority

log = logging.getLogger(__name__)
FRAME_DUE_MARGIN_S = 0.0003  # wake this long after the frames are due (the sleep's own slack is ~0.1 ms)


@dataclass(frozen=True)
class TickResult:
    """What one tick did."""

    appended: bool  # a new stacked frame entered the ring
    skew_ms: float | None  # skew of the matched (or best candidate) set
    reason: str  # why nothing was appended ("" when something was)
    problems: dict[str, str]  # camera -> problem found this tick


@dataclass(frozen=True)
class Stacked:
    """A stacked frame just completed (what `on_stacked` receives), stamps on the bridge's clock [s]."""

    frame: np.ndarray  # [H, W*cams, 3] RGB; valid until the next tick (copy it to keep it)
    stamp_s: float  # capture: the matched views' mean capture stamp
    skew_ms: float  # largest view-to-view stamp difference
    arrival_s: float  # host arrival: when the bridge first read the set's last view
    stacked_s: float  # when the stacked frame entered the ring


@dataclass(frozen=True)
class CameraStatus:
    """Health of one camera for diagnostics."""

    name: str
    ok: bool
    message: str  # current problem, "" when ok
    connected: bool
    stats: SourceStats


class CameraBridge:
    """Owns the sources, the synchroniser and the ring; see the module docstring."""

    def __init__(self, cfg: BridgeConfig, sources: list[CameraSource] | None = None,
                 clock: Clock = time.monotonic):
        self.cfg = cfg
        self.clock = clock
        if sources is None:
            sources = [make_source(c, clock, seed=i) for i, c in enumerate(cfg.cameras)]
        names = [s.name for s in sources]
        expected = [c.name for c in cfg.cameras]
        if names != expected:
            raise CameraError(",".join(names), f"sources {names!r} do not match the configured order {expected!r}")
        self.sources = list(sources)
        self.sync = Synchroniser(expected, cfg.sync_tolerance_ms, cfg.sync_history)
        self.ring = FrameRing(cfg.buffer_frames, cfg.stacked_shape)
        self.writer = ViewWriter(cfg)
        self._scratch = np.zeros(cfg.stacked_shape, np.uint8)  # [H, W*cams, 3] assembled off-lock
        self._lock = threading.Lock()
        self._problems: dict[str, str] = {}
        self._sync_reason = ""  # why the newest tick appended nothing ("" after a success)
        self._events: collections.deque[tuple[float, str]] = collections.deque(maxlen=128)
        self._dropped_seen = {s.name: 0 for s in self.sources}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._tick_starts: collections.deque[float] = collections.deque(maxlen=256)
        self.loop_hz = 0.0  # achieved tick rate over the last second of run()
        self.overruns = 0  # ticks lost because one ran longer than a whole period (the loop resynchronised)
        self.on_stacked: Callable[[Stacked], None] | None = None  # called by tick() with each completed frame
        self.on_stacked_errors = 0  # on_stacked calls that raised (logged; the bridge goes on)
        self._arrived: dict[str, tuple[int, float]] = {}  # camera -> (seq, host time the bridge first read it)

    # ---- lifecycle ------------------------------------------------------------------------
    def connect(self, strict: bool = True) -> dict[str, str]:
        """Open every camera. strict: raise CameraError naming all that failed (and close the
        rest); otherwise return {camera: problem} and let the sources keep retrying."""
        failed = {}
        for src in self.sources:
            try:
                src.connect()
            except CameraError as e:
                failed[src.name] = e.detail
        if failed and strict:
            self.close()
            raise CameraError(",".join(failed), "; ".join(f"{n!r}: {m}" for n, m in failed.items()))
        with self._lock:
            self._problems.update(failed)
        return failed

    def close(self) -> None:
        """Stop the loop if running and release every camera (safe to call twice)."""
        self.stop()
        for src in self.sources:
            src.close()

    def __enter__(self) -> "CameraBridge":
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- one round --------------------------------------------------------------------------
    def tick(self) -> TickResult:
        now = self.clock()
        problems: dict[str, str] = {}
        for cam, src in zip(self.cfg.cameras, self.sources):
            try:
                frame = src.read_latest(cam.max_age_ms)
            except CameraError as e:
                problems[cam.name] = e.detail
                self.sync.forget(cam.name)  # never match its older frames after a fault
                continue
            bad = frame_problem(frame, cam)
            if bad is not None:
                problems[cam.name] = bad
                self.sync.forget(cam.name)
                continue
            if self._arrived.get(cam.name, (None,))[0] != frame.seq:
                self._arrived[cam.name] = (frame.seq, self.clock())
            self.sync.add(frame)
            dropped = src.stats.dropped - self._dropped_seen[cam.name]
            if dropped > 0:
                self._dropped_seen[cam.name] = src.stats.dropped
                self._event(now, f"camera {cam.name!r}: dropped {dropped} frame(s) before frame {frame.seq}")
        self._note_problems(now, problems)
        if problems:
            reason = "; ".join(f"camera {n!r}: {m}" for n, m in problems.items())
            return self._finish(TickResult(False, None, reason, problems))
        match = self.sync.match()
        if match.frames is None:
            if match.reason != self._sync_reason and match.reason.startswith("camera"):
                self._event(now, f"sync: {match.reason}")
            return self._finish(TickResult(False, match.skew_ms, match.reason, problems))
        w = self.cfg.view_width
        for i, frame in enumerate(match.frames):
            self.writer.write(frame, self._scratch[:, i * w:(i + 1) * w])  # [H, w, 3] RGB
        with self._lock:
            self.ring.next_slot()[...] = self._scratch
            self.ring.commit(match.stamp_s, match.skew_ms)
        result = self._finish(TickResult(True, match.skew_ms, "", problems))
        if self.on_stacked is not None:
            arrival = max(self._arrived.get(f.camera, (None, now))[1] for f in match.frames)
            self._hand_over(Stacked(self._scratch, match.stamp_s, match.skew_ms, arrival, self.clock()))
        return result

    def _hand_over(self, stacked: Stacked) -> None:
        """`on_stacked(stacked)`; one that raises is counted and logged (once per kind of error), never
        a camera problem: the ring and the windows go on."""
        try:
            self.on_stacked(stacked)
        except Exception as e:
            self.on_stacked_errors += 1
            msg = f"{type(e).__name__}: {e}"
            if msg != getattr(self, "_last_on_stacked_error", None):
                self._last_on_stacked_error = msg
                log.exception("camera bridge: on_stacked failed (%d so far): %s", self.on_stacked_errors, msg)

    def _finish(self, result: TickResult) -> TickResult:
        with self._lock:
            self._sync_reason = result.reason
        return result

    def _event(self, now: float, text: str) -> None:
        with self._lock:
            self._events.append((now, text))

    def _note_problems(self, now: float, problems: dict[str, str]) -> None:
        def kind(msg: str) -> str:  # "stale", "wrong size", "no frame": one event per change of kind
            return " ".join(msg.replace(":", " ").split()[:2])

        with self._lock:
            for name, msg in problems.items():
                if name not in self._problems or kind(self._problems[name]) != kind(msg):
                    self._events.append((now, f"camera {name!r}: {msg}"))
                    log.warning("camera %r: %s", name, msg)
            for name in set(self._problems) - set(problems):
                self._events.append((now, f"camera {name!r}: recovered"))
                log.info("camera %r: recovered", name)
            self._problems = dict(problems)

    # ---- the clip -------------------------------------------------------------------------
    def latest(self) -> Window:
        """Only the newest stacked frame ([1, H, W, 3]), with the same freshness and camera
        checks as `window()`: for a policy whose anchor is the current observation alone."""
        return self.window(frames=1, skip=1)

    def window(self, frames: int | None = None, skip: int | None = None) -> Window:
        """The clip for the policy, or a not-ready result with reasons naming the cameras.

        `frames` / `skip` default to the config's window_frames / frame_skip."""
        cfg = self.cfg
        n = cfg.window_frames if frames is None else int(frames)
        skip = cfg.frame_skip if skip is None else int(skip)
        span = (n - 1) * skip + 1
        if n < 1 or skip < 1 or span > cfg.buffer_frames:
            raise ValueError(f"window of {frames!r} frames with skip {skip!r} does not fit the "
                             f"{cfg.buffer_frames}-frame buffer")
        now = self.clock()
        with self._lock:
            reasons = [f"{'bridge' if name == 'bridge' else f'camera {name!r}'}: {msg}"
                       for name, msg in self._problems.items()]
            newest = self.ring.newest_stamp()
            age_ms = None if newest is None else (now - newest) * 1000.0
            if self.ring.count < span:
                reasons.append(f"buffer holds {self.ring.count} of the {span} synchronised frames a window spans")
            else:
                if age_ms is not None and age_ms > cfg.max_window_age_ms:
                    reasons.append(f"newest stacked frame is {age_ms:.0f} ms old (max {cfg.max_window_age_ms:.0f} ms)")
                gap_ms, before, after = self.ring.largest_gap(n, skip)
                if gap_ms > cfg.max_gap_ms:
                    reasons.append(self._explain_gap(gap_ms, before, after))
            if reasons and "tolerance" in self._sync_reason and not self._problems:
                reasons.append(f"sync: {self._sync_reason}")
            if reasons:
                return Window(False, None, None, None, tuple(reasons), age_ms)
            idx = self.ring.indices(n, skip)
            frames = self.ring.frames[idx]  # [n, H, W, 3] copy (fancy indexing)
            stamps = self.ring.stamps[idx].copy()
            skews = self.ring.skews[idx].copy()
        return Window(True, frames, stamps, skews, (), age_ms)

    def _explain_gap(self, gap_ms: float, before: float, after: float) -> str:
        missing = max(int(round(gap_ms * self.cfg.source_fps / 1000.0)) - 1, 1)
        late = max(c.max_age_ms for c in self.cfg.cameras) / 1000.0
        causes = [text for t, text in self._events if before <= t <= after + late]
        cause = "; ".join(dict.fromkeys(causes)) if causes else "no camera reported a fault"
        return (f"window spans a gap of {gap_ms:.0f} ms (~{missing} frame(s) missing, max {self.cfg.max_gap_ms:.0f} ms); "
                f"cause: {cause}")

    # ---- diagnostics ----------------------------------------------------------------------
    def statuses(self) -> list[CameraStatus]:
        with self._lock:
            problems = dict(self._problems)
        return [CameraStatus(s.name, s.name not in problems, problems.get(s.name, ""), s.is_connected, s.stats)
                for s in self.sources]

    @property
    def buffer_bytes(self) -> int:
        return self.ring.nbytes + self._scratch.nbytes

    # ---- loop -------------------------------------------------------------------------------
    def run(self, stop: threading.Event, rt_priority: int = 0) -> None:
        """Tick at `tick_hz` until `stop` is set, paced by deadlines (never relative sleeps);
        `rt_priority` > 0: this thread at SCHED_FIFO that priority where the OS allows (else a warning)."""
        if rt_priority:
            set_fifo_priority(rt_priority)
        # paced on the host's monotonic clock (self.clock stamps frames and may be a simulation's);
        # resync: a tick that ran long restarts the grid instead of a burst of catch-up ticks
        pacer = DeadlinePacer(self.cfg.tick_hz, resync=True, max_samples=0)
        pacer.start(delay_s=0.0)
        while self._wait_for_frames(pacer, stop) or pacer.wait(stop) is not None:
            start = self.clock()
            self._tick_starts.append(start)
            while self._tick_starts and start - self._tick_starts[0] > 1.0:
                self._tick_starts.popleft()
            if len(self._tick_starts) >= 2:
                self.loop_hz = (len(self._tick_starts) - 1) / max(self._tick_starts[-1] - self._tick_starts[0], 1e-9)
            try:
                self.tick()
            except Exception as e:  # keep the loop alive; the window reports the failure
                msg = f"tick failed: {type(e).__name__}: {e}"
                with self._lock:
                    if self._problems.get("bridge") != msg:
                        log.exception("camera bridge %s", msg)
                    self._problems["bridge"] = msg
            self.overruns = pacer.missed

    def _frames_due(self) -> float | None:
        """When (on self.clock) every source will have a frame newer than the last one it gave, where
        every source says (`next_frame_due`); else None."""
        due = [s.next_frame_due() for s in self.sources]
        return None if not due or any(d is None for d in due) else max(due)

    def _wait_for_frames(self, pacer: DeadlinePacer, stop: threading.Event) -> bool:
        """Sleep until the sources' next frames are due, if that comes before the pacer's next tick;
        True: tick now (an extra tick off the grid), False: wait for the grid."""
        due = self._frames_due()
        if due is None or pacer.t0 is None:
            return False
        now_mono = time.monotonic()
        wake = now_mono + (due - self.clock()) + FRAME_DUE_MARGIN_S     # the bridge clock may be a simulation's
        if wake >= pacer.t0 + pacer.next_tick * pacer.period or wake <= now_mono:
            return False
        stop.wait(wake - now_mono)
        return not stop.is_set()

    def start(self, rt_priority: int = 0) -> None:
        """Run the loop in a daemon thread (call `stop()` or `close()` to end it)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, args=(self._stop, rt_priority), name="camera-bridge",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=2.0)
