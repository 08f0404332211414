"""Facts of the LIBERO world that several packages share, written once.

One LIBERO step is one controller tick of its robosuite environment holding one action (openpi's
LIBERO client sends one action per step; the episode limits count these ticks). The mocked
environment (vam_sim.libero_mock.config), a LIBERO model preset (eef_delta actions,
vam_model.networks.config.RobotConfig) and the policy's executor take the rate from here; a config
that still states it must agree. The real LIBERO server (vam_sim/libero_real/server.py, which runs
in LIBERO's own environment and imports none of our packages) reports the rate of the environment
it opened, and `libero-check` compares that with the mock's.

Imports only vam_stack.config, so a model config or a simulator can read it without the other.
"""
from __future__ import annotations

import math

from vam_stack.config import check

# Steps per second: LIBERO's ControlEnv(control_freq=20), passed to its robosuite environment
# (libero/libero/envs/env_wrapper.py, Lifelong-Robot-Learning/LIBERO @ 4f0dd188960c25b608babc7de34e1e20a9d1306f).
CONTROL_HZ = 20.0


def libero_rate(where: str, value: float | None, name: str = "control_hz") -> float:
    """LIBERO's controller rate (CONTROL_HZ, its one source) when `value` is None; a config that
    still states one must agree (ConfigError naming both)."""
    if value is None:
        return CONTROL_HZ
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    check(ok and float(value) == CONTROL_HZ,
          f"{where}{name} {value!r} differs from LIBERO's controller rate {CONTROL_HZ!r} (vam_stack.libero.CONTROL_HZ, "
          f"its one source): drop the key or make it agree")
    return float(value)


__all__ = ["CONTROL_HZ", "libero_rate"]
