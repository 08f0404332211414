"""Chunk executor: one target per tick from chunks of A_H actions, lockstep or real time.

A policy returns a chunk of A_H actions for the observation taken at tick `origin`; action i
belongs to tick `origin + i`. The executor runs the first N (`execute`) of them, then the next
chunk takes over. Two modes share one schedule (`ChunkSchedule`):

- `lockstep` (simulation time): `next_action(obs)` replans synchronously when the current
  chunk's N actions are used up, so the sequence is fully deterministic (chunk k covers ticks
  k*N .. k*N+N-1). `lockstep_delay` d > 0 keeps it deterministic but stands in for latency: the
  observation is taken d ticks before the N actions run out, and the chunk is installed d ticks
  later with its first d actions skipped, as in realtime with an exact latency estimate.
- `realtime` (wall clock): `start()` runs a tick thread paced by absolute deadlines on a
  monotonic clock and a worker thread that calls `policy.infer`. The tick thread reads the
  request's observation (`obs_fn()`) at its origin tick, before that tick's target goes out, so
  action 0 of the chunk belongs to the state the policy saw (read later by the worker, it could
  already show the origin tick's action applied: the chunk would run one tick out of step). A replan is
  requested `ceil((latency estimate + margin) * rate)` ticks before the current chunk's N
  actions run out (latency estimate = EMA of measured request-to-result time). When a chunk
  arrives at tick k, its first `k - origin` actions belong to time already elapsed and are
  skipped (latency compensation). If it is late, the old chunk keeps running to its last
  action and then the last target is held; nothing is extrapolated. A chunk that arrives
  after its last action is dropped; `overrun_after` drops in a row put the executor in the
  overrun state (`overrun` true, one error logged, StepInfo.reason "overrun" while holding)
  until a chunk can be used again: inference is slower than a whole chunk, and the arm holds
  without a word unless someone says so. An inference exception
  is logged with its tick/chunk/observation context, the arm holds the last target at once,
  and the request is retried after `retry_after_s`. Pacing and jitter statistics live in
  `vam_control.pacing.DeadlinePacer`; the tick thread may ask for SCHED_FIFO (`rt_priority`).
  To keep the policy's Python work off the tick thread's GIL, wrap the policy in
  `executor_worker.ProcessPolicy` (same contract, runs in a child process).
  `virtual_step(latency_s)` runs the same realtime tick on a virtual clock, without threads: every
  replan takes exactly `latency_s`, so a realtime run is deterministic on any machine (with an exact
  latency and no margin it is the delayed lockstep, tick for tick).

Seam blending: a cross-fade over `blend_ticks` ticks. At the switch tick the old trajectory's
next W targets (including any blend still in progress) are frozen, and target j of the window
is `(1 - w_j) * old_j + w_j * new_j` with `w_j = (j + 1) / (W + 1)`. With a position gap G at
the seam, the extra step per tick is at most G / (W + 1). It is optional (`blend_ticks: 0`),
off for LIBERO's end-effector deltas and on for absolute joint targets.

Real-time chunking (`rtc: guided`, realtime mode). Latency compensation alone makes the next
chunk start where the arm will be, but the model decodes it as if it started now, so two chunks
can disagree at the seam (left or right of an obstacle), which a cross-fade only averages. With
`rtc: guided` each request carries the rest of the executing chunk (`ChunkSchedule.committed`,
blends included) and the delay d, the request's lead = ceil((latency estimate + margin) x rate);
a policy that accepts them (`accepts_committed`, e.g. VamPolicy: vam_model/realtime_chunking.py)
freezes the first d actions to what runs during inference and steers the overlap toward the
rest, after Physical Intelligence's real-time chunking (Black, Galliker and Levine 2025) and
lerobot's RTC. The chunk is installed at exactly origin + d: one that arrives early waits for that
tick, so the first action run is the first one decoded free rather than a frozen copy, and the
switch lands where the frozen prefix ends whatever the wall clock did (`late` counts chunks that
missed it; they install on arrival with the elapsed actions skipped, as without RTC).
With `rtc: trained` the request is the same and names the method: a head trained with a
committed prefix takes the first d actions clean instead of being steered toward them (a policy
whose `rtc_methods` lack it is refused at construction). Any other policy gets the plain request.
The cross-fade and the safety filter's step limit still bound whatever seam remains; `SeamMeter`
reports the largest seam step against the largest step inside a chunk (`stats()`).
"""
from __future__ import annotations

import logging
import math
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from vam_stack.config import ConfigError
from vam_control.pacing import DeadlinePacer
from vam_stack.realtime import set_fifo_priority

from .schedule import ChunkSchedule, ExecutorConfig, ObservationUnavailable, SeamMeter, StepInfo

log = logging.getLogger(__name__)
@dataclass
class _Result:
    origin: int
    latency_s: float
    actions: np.ndarray | None = None
    telemetry: dict | None = None
    error: str | None = None


class ChunkExecutor:
    """Runs a policy's chunks: `next_action(obs)` in lockstep, `start()`/`stop()` in realtime.

    `obs_fn()` (realtime) returns the observation dict for `policy.infer`; `sink(target)`
    (realtime) writes one target to the driver (usually through the safety filter);
    `on_result(dict)` (optional, worker thread) receives each result's telemetry.
    """

    def __init__(self, policy: Any, cfg: ExecutorConfig, *, obs_fn: Callable[[], Mapping] | None = None,
                 sink: Callable[[np.ndarray], Any] | None = None, initial_target: np.ndarray | None = None,
                 on_result: Callable[[dict], Any] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not callable(getattr(policy, "infer", None)):
            raise TypeError(f"policy must have an infer(obs) method, got {type(policy).__name__}")
        spec = getattr(policy, "spec", None)
        for name in ("chunk", "action_dim"):
            if spec is not None and hasattr(spec, name) and getattr(spec, name) != getattr(cfg, name):
                raise ConfigError(f"executor {name}={getattr(cfg, name)!r} does not match the policy's "
                                  f"spec.{name}={getattr(spec, name)!r}")
        if cfg.mode == "realtime" and obs_fn is None:
            raise ValueError("realtime mode needs an obs_fn callable (and a sink to start() its threads)")
        check_rtc_method(policy, cfg.rtc)
        self.policy, self.cfg = policy, cfg
        self.obs_fn, self.sink, self.on_result, self.clock = obs_fn, sink, on_result, clock
        self.pacer = DeadlinePacer(cfg.rate_hz, cfg.spin_s, cfg.max_samples, clock)
        self._unavailable: str | None = None   # kind of the last ObservationUnavailable logged
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.reset(initial_target=initial_target)

    # ----- shared -----
    def reset(self, instruction: str | None = None, initial_target: np.ndarray | None = None) -> None:
        """New episode: clear the schedule and counters; `policy.reset(instruction)` if given."""
        if self.running:
            raise RuntimeError("stop() the executor before reset()")
        if instruction is not None:
            self.policy.reset(instruction)
        self.schedule = ChunkSchedule(self.cfg, initial_target)
        self.seams = SeamMeter()
        self.pacer.reset()
        self._fresh = True
        self.tick = 0
        self.latency_estimate_s = self.cfg.latency_init_s
        self.last_latency_s: float | None = None
        self.errors = self.dropped = self.replans = self.sink_errors = 0
        self.dropped_in_row = 0
        self.overrun = False  # no chunk could be used for `overrun_after` replans in a row
        self.last_info: StepInfo | None = None
        self._retry_tick = 0
        self._request: tuple[int, float, dict | None, Mapping] | None = None   # origin tick, time, committed, obs
        self._pending: _Result | None = None
        self._in_flight = False
        self._promised: int | None = None   # rtc on: the tick the request's chunk is installed at
        self._virtual: tuple[int, _Result] | None = None   # virtual clock: (tick it becomes visible, result)
        self._vtick = 0                                     # virtual clock: the next tick
        self.late = 0                       # rtc on: chunks that arrived after that tick

    def _run_policy(self, obs: Mapping, origin: int, t_req: float, committed: dict | None = None) -> _Result:
        try:
            result = self.policy.infer(obs) if committed is None else self.policy.infer(obs, committed=committed)
            if not isinstance(result, Mapping) or "actions" not in result:
                raise TypeError(f"policy.infer must return a dict with 'actions', got {type(result).__name__}")
            a = np.array(result["actions"], dtype=np.float64)
            if a.shape != (self.cfg.chunk, self.cfg.action_dim):
                raise ValueError(f"actions shape {a.shape} != ({self.cfg.chunk}, {self.cfg.action_dim})")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"actions contain non-finite values at rows {np.flatnonzero(~np.isfinite(a).all(1)).tolist()}")
        except Exception as e:  # logged with context; the schedule holds the arm
            if self._stop.is_set():         # stopping: the policy was closed under the replan (abandoned)
                log.debug("inference abandoned at stop: tick %d (%s: %s)", origin, type(e).__name__, e)
            elif isinstance(e, ValueError):   # a rejected input (e.g. window not ready): one line, no traceback
                log.warning("inference refused its input: tick %d, next chunk %d, obs %s: %s", origin,
                            self.schedule.chunk_id + 1, _describe(obs), e)
            else:
                log.exception("inference failed: tick %d, next chunk %d, obs %s", origin,
                              self.schedule.chunk_id + 1, _describe(obs))
            return _Result(origin, self.clock() - t_req, error=f"{type(e).__name__}: {e}")
        telemetry = {k: v for k, v in result.items() if k != "actions"}
        return _Result(origin, self.clock() - t_req, actions=a, telemetry=telemetry)

    def _apply(self, res: _Result, tick: int) -> dict:
        """Install a result at `tick`; returns StepInfo fields to report."""
        if res.error is not None:
            self.errors += 1
            self.schedule.fail()
            self._retry_tick = tick + math.ceil(self.cfg.retry_after_s * self.cfg.rate_hz)
            return {"error": res.error}
        self.last_latency_s = res.latency_s
        a = self.cfg.latency_ema if self.replans else 1.0  # the first sample replaces the prior
        self.latency_estimate_s = (1 - a) * self.latency_estimate_s + a * res.latency_s
        skip = self.schedule.install(res.actions, res.origin, tick)
        if skip is None:
            self.dropped += 1
            self.dropped_in_row += 1
            log.warning("chunk observed at tick %d arrived at tick %d, after its last action; dropped",
                        res.origin, tick)
            if self.dropped_in_row >= self.cfg.overrun_after and not self.overrun:
                self.overrun = True
                log.error("overrun: inference takes %.2f s, longer than a whole chunk (%d actions = %.2f s); "
                          "%d chunks dropped in a row, the arm holds", res.latency_s, self.cfg.chunk,
                          self.cfg.chunk / self.cfg.rate_hz, self.dropped_in_row)
            return {}
        if self.overrun:
            log.warning("overrun over: a chunk (latency %.2f s) is in use again", res.latency_s)
        self.overrun, self.dropped_in_row = False, 0
        self.replans += 1
        return {"replanned": True, "skipped": skip, "telemetry": res.telemetry, "latency_s": res.latency_s,
                "reanchored": self.schedule.last_reanchor}

    def stats(self) -> dict[str, float]:
        """Timing summary plus latency estimate and counters."""
        out = self.pacer.summary()
        out.update(latency_estimate_ms=self.latency_estimate_s * 1e3,
                   last_latency_ms=float("nan") if self.last_latency_s is None else self.last_latency_s * 1e3,
                   replans=float(self.replans), errors=float(self.errors), dropped=float(self.dropped),
                   sink_errors=float(self.sink_errors), overrun=float(self.overrun), late=float(self.late))
        out.update(self.seams.summary())
        return out

    # ----- lockstep -----
    def next_action(self, obs: Mapping | None = None) -> tuple[np.ndarray, StepInfo]:
        """Lockstep: the action for this step, replanning on `obs` when the chunk is used up. `obs`
        None: `obs_fn()` is read only when a replan needs it, and an unavailable observation holds
        the arm as on the realtime tick (tried again next tick)."""
        if self.cfg.mode != "lockstep":
            raise RuntimeError(f"next_action() is for lockstep mode; this executor is {self.cfg.mode!r}")
        if obs is None and self.obs_fn is None:
            raise ValueError("next_action() needs an observation or an obs_fn to read one from")
        k, d = self.tick, self.cfg.lockstep_delay
        extra: dict = {}
        if self._pending is not None and k >= self._pending.origin + d:     # a delayed replan's chunk arrives
            res, self._pending = self._pending, None
            extra = self._apply(res, k)
        elif self._pending is None and self.schedule.needs_chunk(k):       # the first chunk, or after an error
            extra = self._apply(self._replan(obs, k), k)
        if d and self._pending is None and not self.schedule.needs_chunk(k) \
                and k + d >= self.schedule.origin + self.cfg.execute:     # observe now; the chunk lands d ticks on
            self._pending = self._replan(obs, k, self._committed(k, d))
        target, info = self.schedule.target(k)
        info.time = self.clock()
        for key, v in extra.items():
            setattr(info, key, v)
        self.seams.update(target, info)
        if target is None:  # first inference failed and nothing to hold yet
            target = self.schedule._delta_hold(None) if self.cfg.action_kind == "delta" else None
            if target is None:
                raise RuntimeError(f"no action at step {k}: the first inference failed ({info.error}) and "
                                   "no initial_target was given to hold")
        self.tick += 1
        self.last_info = info
        return target, info

    def _replan(self, obs: Mapping | None, k: int, committed: dict | None = None) -> _Result:
        """Lockstep: the policy's answer at tick k, on `obs` or (None) on `obs_fn()` read now."""
        t = self.clock()
        if obs is None:
            obs = self._observe(k, t)
            if isinstance(obs, _Result):           # unavailable: its error holds the arm
                return obs
        return self._run_policy(obs, k, t, committed)

    # ----- realtime -----
    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def start(self) -> None:
        """Realtime: start the tick and inference threads (tick 0 requests the first chunk)."""
        if self.cfg.mode != "realtime":
            raise RuntimeError(f"start() is for realtime mode; this executor is {self.cfg.mode!r}")
        if self.running:
            raise RuntimeError("executor already running")
        if self.sink is None:
            raise ValueError("start() needs a sink callable: the tick thread sends each target through it")
        if not self._fresh:
            raise RuntimeError("call reset() before starting the executor again")
        self._fresh = False
        self._stop.clear()
        self._old_switch = sys.getswitchinterval()
        sys.setswitchinterval(self.cfg.switch_interval_s)
        self._threads = [threading.Thread(target=self._worker_loop, name="executor-infer", daemon=True),
                         threading.Thread(target=self._tick_loop, name="executor-tick", daemon=True)]
        for t in self._threads:
            t.start()

    def request_stop(self) -> None:
        """Stop ticking now (the driver keeps the last target), without waiting: the tick thread
        sends no further target; an inference in flight finishes (or is abandoned, see
        `ProcessPolicy.close`) and its result is dropped."""
        self._stop.set()
        with self._wake:
            self._wake.notify_all()

    def stop(self, timeout: float = 5.0, abandon: bool = False) -> None:
        """Stop ticking (the driver keeps the last target); waits up to `timeout` for inference.
        `abandon` (a node's exit): an inference still running after `timeout` is left to the daemon
        thread (its result is dropped), said at debug level instead of a warning."""
        self.request_stop()
        for t in self._threads:
            t.join(timeout)
            if t.is_alive():
                if abandon:
                    log.debug("executor thread %s still busy after %.1f s: abandoned", t.name, timeout)
                else:
                    log.warning("executor thread %s still busy after %.1f s (inference running)", t.name, timeout)
        if hasattr(self, "_old_switch"):
            sys.setswitchinterval(self._old_switch)

    def __enter__(self) -> "ChunkExecutor":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def virtual_step(self, latency_s: float) -> tuple[np.ndarray | None, StepInfo]:
        """Realtime mode on a virtual clock, without threads (deterministic whatever the machine's
        load): the realtime tick `k` at time k / rate, its target returned instead of sent. A request
        is answered at once (its observation read at the request, as on the tick thread), but the
        answer becomes visible at the first tick at or after request + `latency_s` and reports that
        latency. The latency estimate, the lead, an early guided chunk's wait and late installs then
        behave as on the wall clock with a policy that always takes `latency_s`."""
        if self.cfg.mode != "realtime":
            raise RuntimeError(f"virtual_step() runs the realtime executor; this one is {self.cfg.mode!r}")
        if self.running:
            raise RuntimeError("virtual_step() drives a stopped executor; its threads are running")
        if not (math.isfinite(latency_s) and latency_s >= 0):
            raise ValueError(f"latency_s must be finite and >= 0, got {latency_s!r}")
        self._fresh = False                                             # reset() before start() again
        k = self._vtick
        if self._virtual is not None and k >= self._virtual[0]:
            self._pending, self._virtual = self._virtual[1], None
        target = self._realtime_step(k, k / self.cfg.rate_hz)
        if self._request is not None:
            origin, t_req, committed, obs = self._request
            self._request = None
            res = self._run_policy(obs, origin, t_req, committed)
            res.latency_s = latency_s
            if self.on_result is not None and res.error is None:
                self.on_result({"origin_tick": origin, "latency_s": latency_s, **(res.telemetry or {})})
            self._virtual = (origin + math.ceil(latency_s * self.cfg.rate_hz - 1e-9), res)
        self._vtick += 1
        return target, self.last_info

    def _worker_loop(self) -> None:
        while not self._stop.is_set():
            with self._wake:
                while self._request is None and not self._stop.is_set():
                    self._wake.wait(0.1)
                if self._stop.is_set():
                    return
                origin, t_req, committed, obs = self._request
                self._request = None
            res = self._run_policy(obs, origin, t_req, committed)
            if self._stop.is_set():            # stopped during the replan: its result is not used
                return
            if self.on_result is not None and res.error is None:
                try:
                    self.on_result({"origin_tick": origin, "latency_s": res.latency_s, **(res.telemetry or {})})
                except Exception:
                    log.exception("on_result callback failed (ignored)")
            with self._lock:
                self._pending = res

    def _observe(self, origin: int, t_req: float) -> Mapping | _Result:
        """At a request (the realtime tick thread; lockstep without an observation): the observation of
        tick `origin`, read before that tick's target goes out, or the error result that holds the arm
        (retried after `retry_after_s` in realtime, at the next tick in lockstep)."""
        try:
            obs = self.obs_fn()
        except ObservationUnavailable as e:
            if e.kind != self._unavailable:     # one line per new reason, not one per retry
                log.warning("no observation at tick %d (holding): %s", origin, e)
            self._unavailable = e.kind
            return _Result(origin, self.clock() - t_req, error=f"obs_fn: {e}")
        except Exception as e:
            log.exception("obs_fn failed at tick %d", origin)
            return _Result(origin, self.clock() - t_req, error=f"obs_fn: {type(e).__name__}: {e}")
        if self._unavailable is not None:
            log.info("observations available again at tick %d", origin)
        self._unavailable = None
        return obs

    def _tick_loop(self) -> None:
        if self.cfg.rt_priority:
            set_fifo_priority(self.cfg.rt_priority)
        self.pacer.start()  # tick 0 one period out: the worker thread is up by then
        while True:
            due = self.pacer.wait(self._stop)
            if due is None:  # stopped
                return
            k, now = due
            c0 = time.perf_counter()
            target = self._realtime_step(k, now)
            if target is not None:
                try:
                    self.sink(target)
                except Exception:
                    self.sink_errors += 1
                    log.exception("sink failed at tick %d", k)
            self.pacer.record_overhead(time.perf_counter() - c0)

    def _realtime_step(self, k: int, now: float) -> np.ndarray | None:
        with self._lock:
            res = self._pending
            # real-time chunking: a chunk that is early waits for the tick its frozen prefix was decoded for
            early = res is not None and res.error is None and self._promised is not None and k < self._promised
            if not early:
                self._pending = None
        extra = {}
        if res is not None and not early:
            self._in_flight = False
            extra = self._apply(res, k)
            self.late += self._promised is not None and res.error is None and k > self._promised
        lead = math.ceil((self.latency_estimate_s + self.cfg.latency_margin_s) * self.cfg.rate_hz)
        if not self._in_flight and k >= self._retry_tick and self.schedule.replan_due(k, lead):
            committed = self._committed(k, delay=lead)
            obs = self._observe(k, now)                    # before tick k's target goes out
            failed = isinstance(obs, _Result)
            self._promised = None if committed is None or failed else k + committed["delay"]
            with self._wake:
                self._in_flight = True
                if failed:                                 # applied next tick: the arm holds, retried later
                    self._pending = obs
                else:
                    self._request = (k, now, committed, obs)
                    self._wake.notify()
        target, info = self.schedule.target(k)
        info.time = now
        if self.overrun and info.held:
            info.reason = "overrun"
        for key, v in extra.items():
            setattr(info, key, v)
        self.seams.update(target, info)
        self.tick = k
        self.last_info = info
        return target

    def _committed(self, k: int, delay: int | None = None) -> dict | None:
        """Real-time chunking's request at tick k: the rest of the executing chunk and the ticks
        expected to pass before the answer (`delay`; default the latency estimate), for a policy that
        accepts them."""
        if self.cfg.rtc == "off" or not getattr(self.policy, "accepts_committed", False):
            return None
        actions = self.schedule.committed(k)
        if actions is None:
            return None
        if delay is None:
            delay = math.ceil(self.latency_estimate_s * self.cfg.rate_hz)
        delay = min(len(actions), delay)
        return {"actions": actions, "delay": delay, "method": self.cfg.rtc}


def check_rtc_method(policy: Any, rtc: str) -> None:
    """ConfigError when `policy` accepts a committed chunk but cannot continue it by `rtc` (its
    `rtc_methods`; default guided only): each replan would otherwise be refused and the arm held."""
    methods = getattr(policy, "rtc_methods", ("guided",))
    if rtc != "off" and getattr(policy, "accepts_committed", False) and rtc not in methods:
        raise ConfigError(f"rtc {rtc!r}: this policy continues a committed chunk only by {methods} (a head "
                          f"trained with a committed prefix takes 'trained': vam_train loss.prefix_prob/prefix_max)")


def _describe(obs: Any) -> str:
    """Short shape/dtype summary of an observation for log messages."""
    if not isinstance(obs, Mapping):
        return type(obs).__name__
    parts = []
    for k, v in obs.items():
        shape = getattr(v, "shape", None)
        parts.append(f"{k}:{tuple(shape)}/{getattr(v, 'dtype', '')}" if shape is not None else f"{k}:{type(v).__name__}")
    return "{" + ", ".join(parts) + "}"
