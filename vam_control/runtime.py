"""The policy node's work without ROS: inputs, episodes, e-stop and target output.

`PolicyRuntime` keeps the newest stacked camera frame (the current observation: all the policy
uses) and the latest joint state, and owns the chunk executor (realtime) and, for absolute joint
targets, the safety filter. Whoever feeds it (the rclpy node, a test) calls `add_frame` / `set_state` from any
thread; they only store. Episodes start and stop in the runtime's own control thread
(`request_start` / `request_stop`), because `policy.reset` embeds the instruction and
stopping waits for an inference in flight: neither may block a ROS callback. Inference runs
in the executor's worker thread; each tick's target goes through the safety filter (absolute
joints) or, for end-effector deltas, an e-stop gate (zero motion, gripper command kept), then
to `send`. When inputs are missing or stale the observation raises, the executor holds, and
the runtime freezes the joint targets at the last one sent (the executor alone would repeat
its last commanded target, which the safety filter may still be rate-limiting toward).

E-stop: `estop(True)` latches the hold at once and stops the policy; `estop(False)` releases
the latch, and motion waits for the next episode start asked for after the release. Each latch and
each release opens a new e-stop epoch; a start carries the epoch it was asked in, and one from an
earlier epoch (queued behind a stop that waited for an inference in flight, an instruction that
arrived while latched, an armed instruction waiting for a joint state) is refused, never started
by a release (issue 71 row 2: such a start moved joint 1 by 2.0 rad after a release).

Staleness: every target goes to the safety filter with the time its tick computed it, so a
target that reaches the filter late (a stalled tick thread) or dated ahead of its clock is
held; `status()` polls the filter's watchdog while an episode runs. Overrun (inference slower
than a whole chunk, so every chunk arrives after its last action): the executor enters its
overrun state, the runtime logs one error, telemetry carries `overrun`, diagnostics report
ERROR, and `on_overrun` says whether to keep trying while the arm holds ("hold") or to end the
episode ("stop").

Stepped (`stepped=True`, the simulators): no tick thread; the caller runs each tick with `step()` on
its own clock (`clock`, e.g. simulated time): the lockstep executor's `next_action`, or the realtime
one's `virtual_step`, then the same hold, overrun and safety path as the tick thread's, stamped with
that clock. Episodes start and stop as on the robot (`request_start` / `request_stop`, e-stop).
"""
from __future__ import annotations

import logging
import math
import queue
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from vam_control.executor import ChunkExecutor
from vam_control.schedule import ExecutorConfig, ObservationUnavailable
from vam_stack.instruction import check_instruction, shorten
from vam_control.safety import SafetyFilter
from vam_stack.config import check


@dataclass(frozen=True)
class RuntimeConfig:
    """Input freshness and overrun handling of the runtime."""

    max_frame_age_s: float = 0.5  # newest camera frame older than this: no observation, the arm holds [s]
    max_state_age_s: float = 0.5  # joint state older than this: no observation, the arm holds [s]
    command_timeout_s: float = 10.0  # how long a caller waits for a start/stop to finish [s]
    on_overrun: str = "hold"  # inference slower than a whole chunk: hold (keep trying, arm held) | stop (end the episode)

    def __post_init__(self) -> None:
        for name in ("max_frame_age_s", "max_state_age_s", "command_timeout_s"):
            v = getattr(self, name)
            check(math.isfinite(v) and v > 0, f"{name} must be > 0, got {v!r}")
        check(self.on_overrun in OVERRUN_ACTIONS, f"on_overrun must be one of {OVERRUN_ACTIONS}, got {self.on_overrun!r}")


OVERRUN_ACTIONS = ("hold", "stop")


class PolicyRuntime:
    """See the module docstring. `send(target)` and `on_telemetry(dict)` run on executor threads."""

    def __init__(self, policy: Any, executor_cfg: ExecutorConfig, cfg: RuntimeConfig, state_names: Sequence[str],
                 send: Callable[[np.ndarray], None], on_telemetry: Callable[[dict], None],
                 safety: SafetyFilter | None = None, log: Any = None, clock: Callable[[], float] = time.monotonic,
                 fit_views: Callable[..., np.ndarray] | None = None, stepped: bool = False,
                 delta_hold: np.ndarray | None = None):
        s = self.spec = policy.spec
        self._fit_views = fit_views   # (frame, views, width, height) -> frame: the camera path's resize; None refuses
        self.policy, self.cfg, self.safety, self.clock = policy, cfg, safety, clock
        self.stepped = stepped                   # the caller runs the ticks (`step`): no tick thread
        self.delta_hold = delta_hold             # deltas, realtime: held before the first chunk (None: zeros)
        self._stepping = False                   # stepped: an episode is running
        if executor_cfg.mode == "lockstep" and not stepped:
            raise ValueError("a lockstep executor is stepped by its caller: PolicyRuntime(..., stepped=True)")
        self.absolute = executor_cfg.action_kind == "absolute"
        if self.absolute and safety is None:
            raise ValueError("absolute joint targets need a safety filter")
        self.state_names = list(state_names)
        if len(self.state_names) != s.proprio_dim:
            raise ValueError(f"{len(self.state_names)} state names for a policy with {s.proprio_dim} proprio values")
        self.log = log or logging.getLogger(__name__)
        self._send_out, self._on_telemetry = send, on_telemetry
        self._frame = np.zeros((s.height, s.width, 3), np.uint8)   # the newest stacked frame: all the policy uses
        self._have_frame = False
        self._lock = threading.Lock()
        self._frame_t = self._state_t = -math.inf
        self._state: np.ndarray | None = None
        self._last_sent: np.ndarray | None = None
        self._overrun_reported = False
        self._estop = threading.Event()
        self._epoch = 0                  # e-stop epoch: +1 at every latch and every release (module docstring)
        self.pending: str | None = None  # instruction waiting for its inputs
        self._pending_epoch = 0          # the epoch `pending` was asked in
        self.instruction: str | None = None
        self.executor = ChunkExecutor(policy, executor_cfg, obs_fn=self.observation, sink=self._send,
                                      on_result=self._result, clock=clock)
        self._commands: queue.Queue = queue.Queue()
        self._control = threading.Thread(target=self._control_loop, name="policy-control", daemon=True)
        self._control.start()

    # ---- inputs (any thread; store only) ----
    def add_frame(self, image: np.ndarray) -> None:
        """Store the newest stacked frame; views of another size are fitted to the policy's by
        `fit_views` (the camera path's rule, `vam_stack.views.fit_views`, which the node
        passes), another layout (or any other size without `fit_views`) is refused."""
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
            raise ValueError(f"stacked frame is {getattr(image, 'dtype', type(image).__name__)} "
                             f"{getattr(image, 'shape', '')}, the policy needs uint8 {self._frame.shape}")
        if image.shape != self._frame.shape and self._fit_views is None:
            raise ValueError(f"stacked frame is {image.dtype} {image.shape}, the policy needs uint8 {self._frame.shape}")
        if image.shape != self._frame.shape:
            views = getattr(self.spec, "views", 1)
            try:
                image = self._fit_views(image, views, self.spec.width // views, self.spec.height)
            except ValueError as e:
                raise ValueError(f"stacked frame is {image.dtype} {image.shape}, the policy needs uint8 "
                                 f"{self._frame.shape} ({views} views): {e}") from None
        with self._lock:
            self._frame[...] = image
            self._have_frame = True
            self._frame_t = self.clock()

    def set_state(self, names: Sequence[str], position: np.ndarray) -> None:
        missing = [n for n in self.state_names if n not in names]
        if missing:
            raise ValueError(f"JointState lacks joints {missing} (has {list(names)})")
        pos = np.asarray(position, np.float64)[[list(names).index(n) for n in self.state_names]]
        if not np.isfinite(pos).all():   # NaN: the driver could not read that joint (the ROS convention)
            bad = {n: float(v) for n, v in zip(self.state_names, pos) if not np.isfinite(v)}
            raise ValueError(f"JointState has non-finite positions {bad} (NaN: the driver could not read that joint); "
                             f"the state is not used")
        with self._lock:
            self._state, self._state_t = pos, self.clock()

    @property
    def running(self) -> bool:
        """An episode runs: the executor's threads, or (stepped) `step()` sends targets."""
        return self._stepping or self.executor.running

    @property
    def estopped(self) -> bool:
        return self._estop.is_set()

    def estop(self, on: bool) -> None:
        """Latch (True) or release (False); repeating the current state changes nothing."""
        if on and self._estop.is_set():
            return
        if on:
            self._estop.set()
            self._epoch += 1             # every start asked before now is void
            self.pending = None
            if self.safety is not None:
                self.safety.estop("operator e-stop")
            self.log.warning("e-stop: holding, policy stopped")
            self.request_stop("e-stop")
        elif self._estop.is_set():
            self._epoch += 1             # so is every start asked while it was latched
            self._estop.clear()
            if self.safety is not None:
                self.safety.clear_estop()
            self.log.warning("e-stop released; nothing moves until an instruction or a start arrives")

    # ---- episodes (control thread) ----
    def request_start(self, instruction: str | None = None, wait: bool = False,
                      on_done: Callable[[bool, str], None] | None = None) -> tuple[bool, str] | None:
        """Start an episode (`instruction` None: the last one); `wait` returns (ok, message);
        `on_done(ok, message)` is called from the control thread once it is decided (a ROS
        service answers from it without blocking its executor)."""
        return self._request("start", instruction, wait, on_done)

    def request_stop(self, why: str, wait: bool = False,
                     on_done: Callable[[bool, str], None] | None = None) -> tuple[bool, str] | None:
        return self._request("stop", why, wait, on_done)

    def _request(self, kind: str, arg: Any, wait: bool, on_done: Callable[[bool, str], None] | None = None
                 ) -> tuple[bool, str] | None:
        done = {"event": threading.Event(), "callback": on_done} if wait or on_done is not None else None
        self._commands.put((kind, arg, done, self._epoch))
        if not wait:
            return None
        if not done["event"].wait(self.cfg.command_timeout_s):
            return False, f"still busy after {self.cfg.command_timeout_s:.0f} s"
        return done["ok"], done["message"]

    def _control_loop(self) -> None:
        while True:
            try:
                kind, arg, done, epoch = self._commands.get(timeout=0.5)
            except queue.Empty:
                if self.pending and not self.running and not self._estop.is_set():
                    self._start(self.pending, self._pending_epoch, quiet=True)
                continue
            if kind == "exit":
                return
            if kind == "start":  # arg None: the last instruction again (the start_episode service)
                ok, message = self._start(self.instruction if arg is None else arg, epoch)
            else:
                ok, message = self._stop(arg)
            if done is not None:
                done.update(ok=ok, message=message)
                done["event"].set()
                if done["callback"] is not None:
                    try:
                        done["callback"](ok, message)
                    except Exception as e:   # the caller's problem: the control thread keeps serving
                        self.log.error(f"{kind} request callback failed: {type(e).__name__}: {e}")

    def _stop(self, why: str) -> tuple[bool, str]:
        self.pending = None
        if self.running:
            self._stepping = False           # stepped: `step()` sends nothing from now on
            if self.executor.running:
                self.executor.stop()
            self.log.info(f"policy stopped ({why}); the arm holds")
        return True, f"stopped ({why})"

    def _void(self, epoch: int) -> str | None:
        """Why a start asked in `epoch` may not begin now (None: it may)."""
        if self._estop.is_set():
            return "e-stop latched: release it first"
        if epoch != self._epoch:
            return ("asked before the e-stop was released: not started (nothing moves after a release until an "
                    "instruction or a start arrives after it; send it again)")
        return None

    def _start(self, instruction: str | None, epoch: int, quiet: bool = False) -> tuple[bool, str]:
        """Start an episode asked for in e-stop `epoch`; `quiet`: a retry of an armed instruction (logs at
        debug level)."""
        if (why := self._void(epoch)) is not None:
            self.pending = None
            return self._refuse(why)
        if instruction is None:
            return self._refuse("no instruction to start an episode with (none was given yet)")
        try:
            check_instruction(instruction)       # refused before the running episode is touched
        except ValueError as e:
            return self._refuse(f"episode not started: {e}")
        self._stop("new episode")
        if self.running:     # the last inference outlived the executor's stop (it waits 5 s)
            self.pending = None
            return self._refuse("episode not started: the previous episode's inference is still running (the arm "
                                "holds); send the instruction again once it has finished")
        self.pending, self._pending_epoch = instruction, epoch
        self.instruction = instruction
        with self._lock:
            state, fresh = self._state, self.clock() - self._state_t <= self.cfg.max_state_age_s
        if self.absolute and (state is None or not fresh):
            return self._refuse("episode armed: waiting for a fresh joint state to prime the safety filter",
                                "debug" if quiet else "info")
        try:
            if self.safety is not None:
                self.safety.reset(state)
            # lockstep (simulation) holds no initial target: its first chunk lands at tick 0, unblended, as the
            # simulators have always run it (blending it in from the measured state would move every recorded run)
            hold = None if self.executor.cfg.mode == "lockstep" else state if self.absolute else self.delta_hold
            self.executor.reset(instruction=instruction, initial_target=hold)
            if self._void(epoch) is not None:    # latched (and maybe released) while the instruction was embedding
                self.pending = None
                return self._refuse("e-stop latched while the episode was starting: not started")
            if self.stepped:
                self._stepping = True
            else:
                self.executor.start()
        except Exception as e:  # a bad instruction or a policy that cannot start: say why, stay held
            self.pending = None
            return self._refuse(f"episode not started: {type(e).__name__}: {e}")
        self.pending = None
        self.log.info(f"episode started: {shorten(repr(instruction))}")
        return True, f"episode started: {shorten(repr(instruction))}"

    def _refuse(self, message: str, level: str = "error") -> tuple[bool, str]:
        # one call site per severity: rclpy's logger refuses a call site that changes severity
        if level == "debug":
            self.log.debug(message)
        elif level == "info":
            self.log.info(message)
        else:
            self.log.error(message)
        return False, message

    def step(self, latency_s: float = 0.0) -> tuple[np.ndarray | None, Any]:
        """Stepped: one tick on the caller's clock. While an episode runs, the executor's target (lockstep:
        `next_action`, reading the observation only when it replans; realtime: `virtual_step(latency_s)`)
        goes to `send` through `_send` as on the tick thread. Returns that target before the filter and its
        StepInfo; (None, None) when no episode runs (nothing is sent: the driver holds its last target)."""
        if not self.stepped:
            raise RuntimeError("step() drives a stepped runtime; this one runs its own tick thread")
        if not self._stepping:
            return None, None
        if self.executor.cfg.mode == "lockstep":
            target, info = self.executor.next_action()
        else:
            target, info = self.executor.virtual_step(latency_s)
        if target is not None:
            self._send(target)
        return target, info

    def current_frame(self) -> np.ndarray:
        """A copy of the newest stacked frame as the policy sees it (fitted to its views)."""
        with self._lock:
            return self._frame.copy()

    # ---- executor threads ----
    def observation(self) -> dict:
        """Worker thread: the policy's input, or an exception (the executor then holds)."""
        now = self.clock()
        with self._lock:
            if not self._have_frame:
                raise ObservationUnavailable("frame", "no camera frame received yet")
            if now - self._frame_t > self.cfg.max_frame_age_s:
                raise ObservationUnavailable("frame_age", f"newest camera frame is {now - self._frame_t:.3f} s old "
                                                          f"(> max_frame_age_s {self.cfg.max_frame_age_s} s)")
            frame = self._frame.copy()                                     # [H, W, 3]: the current frame
            state, age = self._state, now - self._state_t
        if state is None or age > self.cfg.max_state_age_s:
            raise ObservationUnavailable("state_age", f"no joint state for {age:.3f} s "
                                                      f"(> max_state_age_s {self.cfg.max_state_age_s} s)")
        return {"frame": frame, "proprio": state.astype(np.float32)}

    def _send(self, target: np.ndarray) -> None:
        info = self.executor.last_info
        if info is not None and info.reason == "error" and self._last_sent is not None and self.absolute:
            target = self._last_sent  # no observation: freeze where the arm was sent, not where it was heading
        self._check_overrun()
        if self.safety is not None:     # stamped with its tick's time: late or future-dated targets hold
            stamp = None if info is None else info.time
            sent = self.safety.filter(target, stamp=stamp, now=self.clock()).sent
        elif self._estop.is_set():  # deltas: zero motion, gripper command kept
            sent = np.zeros_like(target)
            sent[-1] = self._last_sent[-1] if self._last_sent is not None else 0.0
        else:
            sent = target
        self._last_sent = sent
        self._send_out(sent)

    def _check_overrun(self) -> None:
        """Tick thread: report the executor's overrun state once per entry, act on `on_overrun`."""
        if self.executor.overrun and not self._overrun_reported:
            self._overrun_reported = True
            span = self.spec.chunk / float(self.spec.rate_hz)
            self.log.error(f"overrun: inference ({self.executor.last_latency_s or float('nan'):.2f} s) is slower than "
                           f"a whole chunk ({span:.2f} s), no chunk can be used; the arm holds"
                           + (" and the episode ends" if self.cfg.on_overrun == "stop" else ", still trying"))
            if self.cfg.on_overrun == "stop":
                self.request_stop("overrun")
        elif not self.executor.overrun:
            self._overrun_reported = False

    def _result(self, tel: dict) -> None:
        span = self.spec.chunk / float(self.spec.rate_hz)   # a result this late cannot be used
        self._on_telemetry(dict(tel, step=int(tel["origin_tick"]), request_latency_ms=1e3 * tel["latency_s"],
                                overrun=bool(tel["latency_s"] >= span)))

    # ---- status and shutdown ----
    def status(self) -> dict[str, Any]:
        now = self.clock()
        out = {**self.executor.stats(), "running": self.running, "estop": self._estop.is_set(),
               "instruction": self.instruction or "", "frame_age_s": now - self._frame_t, "state_age_s": now - self._state_t}
        if self.safety is not None:
            if self.running and self.safety.last_sent is not None:
                out["safety_watchdog"] = self.safety.poll(now).reason == "stale"   # tick thread stalled
            out.update({f"safety_{k}": v for k, v in self.safety.counts.items()})
        out["overrun"] = bool(self.executor.overrun)
        return out

    def begin_close(self) -> None:
        """At once, waiting for nothing: no further target goes out (the driver holds the last one),
        no new episode starts, and the control thread is asked to exit."""
        self._estop.set()                  # a start the control thread is in the middle of does not begin
        self.pending = None
        self.executor.request_stop()
        self._commands.put(("exit", None, None, self._epoch))

    def close(self, timeout_s: float | None = None) -> None:
        """Stop the executor (the driver then holds) and the control thread, waiting up to
        `timeout_s` for each (None: command_timeout_s). Close the policy between `begin_close` and
        this to abandon an inference in flight instead of waiting for it."""
        timeout_s = self.cfg.command_timeout_s if timeout_s is None else timeout_s
        self.begin_close()
        self._control.join(timeout_s)
        self.executor.stop(timeout_s, abandon=True)


def warm_up(policy: Any, guidance: Any = None, seed: int | None = None) -> dict[str, float]:
    """Run `policy` on a blank observation before any episode, so the first replan after an
    instruction takes its steady-state time: torch's first-call costs (allocations, kernel choice,
    lazy modules, a GPU's TensorRT engines) are paid here, in the node's configure, not with the
    arm waiting. With a policy that can be tuned (`configure`), one replan runs with every guidance
    branch (the `flat` schedule at the configured base weights), then `guidance` is restored; the
    noise generator restarts at `seed` afterwards, so the warm-up leaves no trace in the episode.
    Returns the seconds each part took."""
    s = policy.spec
    obs = {"frame": np.zeros((s.height, s.width, 3), np.uint8),
           "proprio": np.zeros(s.proprio_dim, np.float32)}
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    policy.reset("warm up")
    times["reset"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    policy.infer(obs)
    times["first_replan"] = time.perf_counter() - t0
    configure = getattr(policy, "configure", None)
    if configure is not None and guidance is not None:
        configure(guidance=replace(guidance, schedule="flat"))
        t0 = time.perf_counter()
        policy.infer(obs)
        times["all_branches_replan"] = time.perf_counter() - t0
        configure(guidance=guidance)
    t0 = time.perf_counter()
    policy.infer(obs)
    times["steady_replan"] = time.perf_counter() - t0
    reseed = getattr(policy, "reseed", None)
    if reseed is not None and seed is not None:
        reseed(int(seed))
    return times
