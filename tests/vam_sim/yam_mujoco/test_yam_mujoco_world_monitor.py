"""The world node's report (`WorldMonitor`) without ROS or MuJoCo: the real-time factor between two
updates, the task solved said once, and the /diagnostics entry it becomes."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from vam_sim.yam_mujoco.world_monitor import WorldMonitor

pytestmark = pytest.mark.unit


class FakeSim:
    def __init__(self):
        self.time, self.solved, self.syncs = 0.0, False, 0
        self.lock = threading.Lock()
        self.cfg = SimpleNamespace(task="handover")
        self.task = SimpleNamespace(success=lambda sim: sim.solved)

    def sync(self):
        self.syncs += 1


def test_the_real_time_factor_is_simulated_over_host_seconds_and_warns_below_0_9():
    sim, wall = FakeSim(), [10.0]
    monitor = WorldMonitor(sim, wall_clock=lambda: wall[0])
    assert monitor.status()["level"] == "ok" and monitor.status()["message"] == "real time"   # NaN: not measured
    sim.time, wall[0] = 1.0, 11.0
    monitor.update()
    assert sim.syncs == 1 and monitor.real_time_factor == pytest.approx(1.0)
    sim.time, wall[0] = 1.5, 12.0
    monitor.update()
    status = monitor.status()
    assert monitor.real_time_factor == pytest.approx(0.5)
    assert status["level"] == "warn" and status["message"] == "slower than real time (0.50x)"
    assert status["values"] == {"real_time_factor": 0.5, "sim_time_s": 1.5, "task": "handover", "task_solved": False}
    monitor.update()                                  # no host time passed: the last factor stands
    assert monitor.real_time_factor == pytest.approx(0.5)


def test_a_solved_task_is_said_once_and_reported():
    sim = FakeSim()
    monitor = WorldMonitor(sim)
    assert monitor.update() is False
    sim.solved = True
    assert monitor.update() is True and monitor.update() is False
    assert monitor.status()["values"]["task_solved"] is True
