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

Plain Python: the node calls `start` once the driver's measured joints arrive and `tick` on
its timer.
"""
from __future__ import annotations

from dataclasses import dataclass

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
