"""`MujocoCameraSource`: one simulated view behind the camera bridge's source interface.

A frame exists for every 1/fps of simulated time; `read_latest` renders the newest one when
the simulator has reached it (a view is rendered at most once per frame). Stamps are on the
simulator's `clock()` axis: simulated seconds in lockstep runs, host monotonic seconds in
wall-clock runs, so freshness checks and view synchronisation work as with real cameras.
`sim.reset()` restarts simulated time at 0: build new sources (`SimRobot.bridge()`) per episode.
"""
from __future__ import annotations

import math

from camera_bridge.config import BridgeConfig, CameraConfig
from camera_bridge.sources.base import CameraDisconnected, CameraError, CameraSource, Frame

from .sim import RenderUnavailable, YamSim


class MujocoCameraSource(CameraSource):
    """Renders `cfg.name` (top, left_wrist, right_wrist) from a shared `YamSim`."""

    def __init__(self, cfg: CameraConfig, sim: YamSim):
        super().__init__(cfg, clock=sim.clock)
        if cfg.name not in sim.cfg.cameras:
            raise CameraError(cfg.name, f"the simulator renders {list(sim.cfg.cameras)}, not {cfg.name!r}")
        if (cfg.width, cfg.height) != (sim.cfg.camera_width, sim.cfg.camera_height):
            raise CameraError(cfg.name, f"configured {cfg.width}x{cfg.height} but the simulator renders "
                                        f"{sim.cfg.camera_width}x{sim.cfg.camera_height}")
        if cfg.encoding != "rgb8":
            raise CameraError(cfg.name, f"the simulator renders rgb8, the config says {cfg.encoding!r}")
        self.sim = sim
        self._last_index = -1
        self.paused = False  # fault switch: the view stops producing frames

    def _open(self) -> None:
        try:
            with self.sim.lock:
                self.sim._ensure_renderer()
        except RenderUnavailable as e:
            raise CameraDisconnected(self.name, str(e)) from e

    def _release(self) -> None:
        return None  # the renderer is shared by every view and owned by the simulator

    def frame_index(self) -> int:
        """Index of the newest frame the simulated time has reached."""
        return int(math.floor(self.sim.time * self.cfg.fps + 1e-6))

    def _poll(self) -> Frame | None:
        if self.paused:
            return None
        self.sim.sync()
        with self.sim.lock:
            index = self.frame_index()
            if index <= self._last_index:
                return None
            image = self.sim.render(self.name)  # [H, W, 3] uint8 RGB
            stamp = self.sim.sim_to_clock(index / self.cfg.fps)
        self._last_index = index
        return Frame(self.name, image, "rgb8", stamp, index)


def make_sources(cfg: BridgeConfig, sim: YamSim) -> list[MujocoCameraSource]:
    """One source per configured camera, in the bridge's stacking order."""
    return [MujocoCameraSource(c, sim) for c in cfg.cameras]
