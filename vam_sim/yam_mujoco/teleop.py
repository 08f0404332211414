"""The scripted expert as a teleoperator of the ROS graph (`yam_mujoco_sim` with `teleop: expert`).

A person teleoperating the YAM moves a leader arm and the follower's driver tracks the stream
of joint targets. In simulation the scripted expert plays that person: every control tick it
reads the world (privileged state, as a person sees the scene), produces the 14 absolute
targets (its raw command, published on /teleop/joint_command as a leader arm's reading would be),
and those go through the same safety filter the policy's targets pass (margins, per-tick step,
e-stop latch) before they are published on /vam/joint_targets for the driver. The demo recorder
then records what a real teleoperated session records: the measured joints, the camera views, the
raw command and the filtered targets, the instruction, plus the expert's phase label.

With `noise` (a `runner.JointNoise`, as `vam-stack collect --joint-noise` uses) the executed arm
targets wander off the plan while the raw command stays the expert's clean target, so the
demonstration shows the way back (a person's hand wanders too; the leader arm's reading is what
they meant). The perturbation is gated by phase exactly as in `collect` (`noise_where`).

Plain Python: `TeleopSession` is what the world node runs (one episode per world: the measured
joints, the operator's ~/start_teleop, one `ExpertTeleop.tick` per control period); the node
converts and publishes what it returns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vam_control.safety import SafetyFilter
from vam_stack.names import NOISE_WHERE

from .expert import make_expert
from .runner import JointNoise
from .sim import YamSim


@dataclass
class TeleopTick:
    target: np.ndarray     # (14,) the target sent, after the (optional) perturbation and the safety filter
    command: np.ndarray    # (14,) the expert's raw, clean command (the demonstration's action, as a leader arm's
                           # reading)
    phase: str             # the task's phase now (planning | manipulation)
    done: bool             # the expert's plan has run out or the task is solved (the target then holds)
    limited: tuple         # names of the safety limits that changed the expert's target


class ExpertTeleop:
    """The scripted expert behind a safety filter, one `tick` per control period."""

    def __init__(self, sim: YamSim, safety: SafetyFilter, noise: JointNoise | None = None,
                 noise_where: str = "everywhere"):
        if noise_where not in NOISE_WHERE:
            raise ValueError(f"teleop: noise_where must be one of {NOISE_WHERE}, got {noise_where!r}")
        self.sim, self.safety = sim, safety
        self.noise, self.noise_where = noise, noise_where
        self.expert = None
        self.ticks = 0
        self.solved_at: int | None = None

    @property
    def started(self) -> bool:
        return self.expert is not None

    @property
    def done(self) -> bool:
        """The task is solved or the expert's plan has run out (the target then holds)."""
        return self.started and (self.solved_at is not None or self.expert.done)

    def start(self, measured: np.ndarray) -> None:
        """Begin from the measured joints (the filter is primed with them; the expert holds them first)."""
        measured = np.asarray(measured, np.float64)
        if measured.shape != (14,) or not np.isfinite(measured).all():
            raise ValueError(f"teleop: measured joints must be 14 finite values, got {measured!r}")
        self.safety.reset(measured)
        with self.sim.lock:
            self.expert = make_expert(self.sim, self.sim.cfg.control_hz)

    def tick(self, stamp: float, now: float) -> TeleopTick:
        if self.expert is None:
            raise RuntimeError("teleop: tick before start")
        self.sim.sync()
        with self.sim.lock:
            phase = self.sim.task.phase(self.sim)
            if self.solved_at is None and self.sim.task.success(self.sim):
                self.solved_at = self.ticks
            done = self.done
            action = np.asarray(self.safety.last_sent if done else self.expert.act(), np.float64)
        executed = action
        if self.noise is not None and not done:       # a finished demonstration holds still
            executed = self.noise(action, self.noise_where == "everywhere" or phase == "planning")
        result = self.safety.filter(executed, stamp=stamp, now=now)
        self.ticks += 1
        return TeleopTick(result.sent, action.copy(), phase, done, tuple(sorted(result.clipped)))


@dataclass
class SessionStep:
    """What one control period of a `TeleopSession` did, for the node to publish and log."""

    tick: TeleopTick
    new_phase: str | None   # the phase, when it changed with this tick (None: unchanged)
    finished: bool          # the expert finished with this tick (said once)


class TeleopSession:
    """The world node's teleoperator: one episode per world. It follows the driver's measured joints
    (`observe`), starts when the operator asks (`request_start`) and measured joints are there, from
    them (`start`), then `step`s once per control period."""

    def __init__(self, teleop: ExpertTeleop, names: Sequence[str]):
        self.teleop = teleop
        self.names = list(names)      # the 14 joints in target order (the robot description's published names)
        self.measured: np.ndarray | None = None
        self.requested = False
        self.phase: str | None = None
        self._finished_said = False

    def observe(self, names: Sequence[str], position: np.ndarray) -> None:
        """The driver's joint states, reordered to `names`; ValueError naming the joints they lack."""
        names = list(names)
        missing = [n for n in self.names if n not in names]
        if missing:
            raise ValueError(f"teleop: /joint_states lacks {missing}; not following it")
        self.measured = np.asarray(position)[[names.index(n) for n in self.names]]

    def request_start(self) -> tuple[bool, str]:
        """The answer to ~/start_teleop (success, message); the first success starts the episode."""
        if self.requested:
            return False, "teleop already started (restart the world for another episode)"
        if self.measured is None:
            return False, "no /joint_states yet: is the driver up?"
        self.requested = True
        sim = self.teleop.sim
        return True, f"teleoperating {sim.cfg.task!r}: {sim.task.instruction!r}"

    @property
    def due_to_start(self) -> bool:
        """Requested and not started yet: the next control period calls `start`."""
        return self.requested and not self.teleop.started

    def start(self) -> None:
        """Begin the expert from the measured joints."""
        self.teleop.start(self.measured)

    def step(self, now: float) -> SessionStep:
        """One control period at `now` (stamp and time of the safety filter)."""
        tick = self.teleop.tick(now, now)
        new_phase = tick.phase if tick.phase != self.phase else None
        self.phase = tick.phase
        finished = tick.done and not self._finished_said
        self._finished_said = self._finished_said or tick.done
        return SessionStep(tick, new_phase, finished)

    def status(self) -> dict:
        """The teleoperator's /diagnostics entry (`vam_stack.ros.diagnostics` form)."""
        t = self.teleop
        message = "done" if t.done else "teleoperating" if t.started else "waiting for ~/start_teleop"
        return {"name": "yam_mujoco_sim: teleop", "level": "ok", "hardware_id": "mujoco", "message": message,
                "values": {"started": t.started, "ticks": t.ticks, "phase": self.phase or "", "done": t.done,
                           "solved_at_tick": -1 if t.solved_at is None else t.solved_at}}
