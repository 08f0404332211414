"""Shared helpers for the camera_bridge tests: a manual clock and config builders."""
from __future__ import annotations

import dataclasses

import pytest

from camera_bridge.config import BridgeConfig, CameraConfig


class ManualClock:
    """A clock the test moves by hand; every source and the bridge read it."""

    def __init__(self, start: float = 1000.0):
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def synthetic_config(**bridge_overrides) -> BridgeConfig:
    """Robot geometry with three synthetic cameras; keyword arguments replace bridge fields."""
    cams = tuple(CameraConfig(n) for n in ("top", "left_wrist", "right_wrist"))
    return dataclasses.replace(BridgeConfig(cameras=cams), **bridge_overrides)


def run_ticks(bridge, clock: ManualClock, seconds: float, hz: float = 60.0) -> list:
    """Tick `bridge` at `hz` on the manual clock for `seconds`; returns the TickResults."""
    results = []
    for _ in range(int(round(seconds * hz))):
        results.append(bridge.tick())
        clock.advance(1.0 / hz)
    return results


@pytest.fixture(name="synthetic_config")
def _synthetic_config_fixture():
    return synthetic_config


@pytest.fixture(name="run_ticks")
def _run_ticks_fixture():
    return run_ticks
