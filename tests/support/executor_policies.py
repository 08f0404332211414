"""Fake policies and a runner for the chunk executor's tests (tests/vam_control): shared by module
name through pytest.ini's `pythonpath`, since test modules never import each other (launch_testing's
collection hook imports every test module in pytest's default import mode, where a relative import
between test modules fails)."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np

from vam_control.executor import ChunkExecutor
from vam_control.schedule import robot_config

RATE, CHUNK, EXECUTE, DIM = 100.0, 20, 10, 14


class SlowPolicy:
    """Action i of call c is 1000*c + i; sleeps `delay` s; optional failing or blocking calls."""

    def __init__(self, delay: float, fail_on=(), block_from: int | None = None):
        self.spec = SimpleNamespace(chunk=CHUNK, execute=EXECUTE, action_dim=DIM, rate_hz=RATE)
        self.delay, self.fail_on, self.block_from = delay, fail_on, block_from
        self.release = threading.Event()
        self.calls = 0

    def reset(self, instruction: str) -> None:
        pass

    def infer(self, obs: dict) -> dict:
        c = self.calls
        self.calls += 1
        time.sleep(self.delay)
        if self.block_from is not None and c >= self.block_from:
            self.release.wait(30)
        if c in self.fail_on:
            raise RuntimeError(f"fake failure on call {c}")
        return {"actions": (1000.0 * c + np.arange(CHUNK))[:, None].repeat(DIM, 1), "call": c}


class Recorder:
    def __init__(self):
        self.ex = None
        self.log: list[tuple[float, object]] = []

    def __call__(self, target: np.ndarray) -> None:
        self.log.append((float(target[0]), self.ex.last_info))


def run(policy, until, timeout=30.0, on_result=None, **cfg):
    rec = Recorder()
    ex = ChunkExecutor(policy, robot_config(rate_hz=RATE, chunk=CHUNK, execute=EXECUTE, **cfg),
                       obs_fn=lambda: {"proprio": np.zeros(14, np.float32)}, sink=rec,
                       initial_target=np.full(DIM, -1.0), on_result=on_result)
    rec.ex = ex
    end = time.monotonic() + timeout
    with ex:
        while not until(ex) and time.monotonic() < end:
            time.sleep(0.01)
        if policy.block_from is not None:
            policy.release.set()
    assert until(ex), f"condition not reached in {timeout} s; stats {ex.stats()}"
    return ex, rec.log


class ContinuingPolicy(SlowPolicy):
    """A SlowPolicy that accepts committed chunks and keeps every request's."""

    accepts_committed = True

    def __init__(self, delay: float):
        super().__init__(delay)
        self.requests: list[dict | None] = []

    def infer(self, obs: dict, committed: dict | None = None) -> dict:
        self.requests.append(committed)
        return super().infer(obs)


def frames_stop_at(monkeypatch, tick: int) -> None:
    """From executor tick `tick` on, the robot's control loop gets no observation (a camera that
    stopped): PolicyRuntime.observation raises ObservationUnavailable, as its stale-frame check does."""
    from vam_control.runtime import PolicyRuntime
    from vam_control.schedule import ObservationUnavailable

    observation = PolicyRuntime.observation

    def stale_from(self):
        if self.executor.tick >= tick:
            raise ObservationUnavailable("frame_age", "frames stopped (test)")
        return observation(self)
    monkeypatch.setattr(PolicyRuntime, "observation", stale_from)
