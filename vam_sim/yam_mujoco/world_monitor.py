"""What the world node (`yam_mujoco_sim`) reports about the MuJoCo world, in plain Python: the
achieved real-time factor (simulated seconds per host second, 1.0 when the host keeps up), the
simulated time and whether the task is solved, as its /diagnostics status."""
from __future__ import annotations

import time
from typing import Any, Callable

RTF_WARN_BELOW = 0.9   # a world slower than this fraction of real time is a warning on /diagnostics


class WorldMonitor:
    """`update()` once per diagnostics period: syncs the world to the host clock, measures the
    real-time factor since the last update and reads whether the task is solved; `status()` is
    the world's /diagnostics entry."""

    def __init__(self, sim: Any, wall_clock: Callable[[], float] = time.monotonic):
        self.sim = sim
        self._wall_clock = wall_clock
        self._last_wall = wall_clock()
        self.sim_time_s = sim.time              # the world's time at the last update [s]
        self.real_time_factor = float("nan")   # simulated s per host s between the last two updates; NaN: not yet
        self.solved = False

    def update(self) -> bool:
        """Measure; True when the task became solved since the last update (for the node's log)."""
        self.sim.sync()
        wall, t_sim = self._wall_clock(), self.sim.time
        if wall > self._last_wall:
            self.real_time_factor = (t_sim - self.sim_time_s) / (wall - self._last_wall)
        self._last_wall = wall
        self.sim_time_s = t_sim
        with self.sim.lock:
            solved = bool(self.sim.task.success(self.sim))
        newly_solved = solved and not self.solved
        self.solved = solved
        return newly_solved

    def status(self) -> dict:
        """The world's /diagnostics entry (`vam_stack.ros.diagnostics` form)."""
        rtf = self.real_time_factor
        real_time = rtf != rtf or rtf >= RTF_WARN_BELOW     # NaN: not measured yet
        return {"name": "yam_mujoco_sim: world", "level": "ok" if real_time else "warn",
                "message": "real time" if real_time else f"slower than real time ({rtf:.2f}x)",
                "hardware_id": "mujoco",
                "values": {"real_time_factor": rtf, "sim_time_s": self.sim_time_s, "task": self.sim.cfg.task,
                           "task_solved": self.solved}}
