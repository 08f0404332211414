"""Build the simulated robot from configuration: simulator, driver on `MujocoBus`, camera bridge.

`config/yam_mujoco.yaml` selects everything: the `yam_mujoco` section (task, physics, views,
time mode), the driver file it names (the real robot's `yam_driver_damiao.yaml` by default)
and its `camera_bridge` section. The returned objects are the ordinary `YamDriver` and
`CameraBridge`, so the code above them (safety filter, executor, nodes) does not change.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from camera_bridge.bridge import CameraBridge
from camera_bridge.config import BridgeConfig, load_bridge_config
from vam_stack.config import ConfigError
from yam_driver.config import DriverConfig, load_config
from yam_driver.driver import YamDriver

from .bus import MujocoBus
from .camera import make_sources
from .config import MujocoConfig, default_path, load_mujoco_config
from .sim import YamSim


@dataclass
class SimRobot:
    """Everything the robot path needs in place of hardware."""

    sim: YamSim
    driver_cfg: DriverConfig
    bridge_cfg: BridgeConfig
    config_path: Path

    def driver(self) -> YamDriver:
        """A fresh driver (unstarted) on this simulator, on the simulator's clock."""
        return YamDriver(self.driver_cfg, bus=MujocoBus(self.driver_cfg, self.sim), clock=self.sim.clock)

    def bridge(self) -> CameraBridge:
        """A fresh camera bridge (unconnected) over the simulator's views, on its clock."""
        return CameraBridge(self.bridge_cfg, make_sources(self.bridge_cfg, self.sim), clock=self.sim.clock)

    def close(self) -> None:
        self.sim.close()


def build_sim_robot(path: str | Path | None = None, **overrides) -> SimRobot:
    """Load `path` (default config/yam_mujoco.yaml); `overrides` replace `yam_mujoco` fields."""
    path = Path(path) if path is not None else default_path()
    cfg: MujocoConfig = load_mujoco_config(path, **overrides)
    driver_cfg = load_config(cfg.driver_config_path())
    if cfg.gravity_factor is not None and driver_cfg.gravity_factor is not None:
        driver_cfg = dataclasses.replace(driver_cfg, gravity_factor=cfg.gravity_factor)   # checked again there
    if abs(driver_cfg.rate_hz - cfg.control_hz) > 1e-9:
        raise ConfigError(f"driver rate_hz {driver_cfg.rate_hz!r} differs from yam_mujoco.control_hz "
                          f"{cfg.control_hz!r}; one tick must be one control period")
    bridge_cfg = load_bridge_config(path)
    names = tuple(c.name for c in bridge_cfg.cameras)
    if names != cfg.cameras:
        raise ConfigError(f"camera_bridge cameras {names!r} differ from yam_mujoco.cameras {cfg.cameras!r}")
    return SimRobot(YamSim(cfg), driver_cfg, bridge_cfg, path)
