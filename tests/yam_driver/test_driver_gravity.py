"""Gravity feed-forward (issue 57): the model's torque is the gradient of the arm's potential
energy, it is saturated and scaled as configured, and a driver on emulated Damiao motors under
gravity holds its command with it and sags by tau_g / kp without it."""
import dataclasses
import time

import numpy as np
import pytest

from vam_stack.config import ConfigError
from yam_driver.config import load_config
from yam_driver.driver import YamDriver
from yam_driver.emulators import EmulatedRig
from yam_driver.gravity import GravityModel, gravity_load

POSE = np.array([0.3, 2.0, 1.6, 0.5, -0.4, 0.7, 0.5, -0.2, 1.2, 1.0, -0.3, 0.6, 0.1, 1.0])


def _potential(model: GravityModel, q_arm: np.ndarray, opening: float) -> float:
    m, d = model.model, model.data
    q = np.concatenate([q_arm, [opening]] * 2)
    model.torque(q)                                   # sets qpos (both arms alike) and runs kinematics
    return float(-(m.body_mass[1:] * (d.xipos[1:] @ m.opt.gravity)).sum())   # -sum m g.x


@pytest.mark.unit
def test_torque_is_the_gradient_of_the_potential_energy():
    model = GravityModel(load_config(bus="damiao"))
    q_arm, h = POSE[:6], 1e-6
    tau = model.torque(np.concatenate([q_arm, [0.5]] * 2))[:6]
    numeric = [(_potential(model, q_arm + h * e, 0.5) - _potential(model, q_arm - h * e, 0.5)) / (2 * h)
               for e in np.eye(6)]
    np.testing.assert_allclose(tau, numeric, atol=1e-5)
    assert abs(tau[1]) > 5.0                          # joint 2 carries the arm: several Nm


@pytest.mark.unit
def test_feedforward_scales_saturates_and_skips_an_unknown_pose():
    cfg = load_config(bus="damiao")
    model = GravityModel(cfg)
    tau, ff = model.torque(POSE), model.feedforward(POSE)
    factor = np.tile(list(cfg.gravity_factor) + [0.0], 2)
    np.testing.assert_allclose(ff, tau * factor)
    assert ff[6] == ff[13] == 0.0                     # the gripper carries no gravity feed-forward
    model.limit[:] = 0.5
    assert np.abs(model.feedforward(POSE)).max() == pytest.approx(0.5)
    pose = POSE.copy()
    pose[2] = np.nan                                  # a joint not read: that arm's feed-forward is 0
    out = GravityModel(cfg).feedforward(pose)
    assert (out[:7] == 0).all() and (out[7:] != 0).any()


@pytest.mark.unit
def test_damiao_needs_an_explicit_factor_and_dynamixel_refuses_one():
    cfg = load_config(bus="damiao")
    with pytest.raises(ConfigError, match="gravity_factor"):
        dataclasses.replace(cfg, gravity_factor=None)
    with pytest.raises(ConfigError, match=r"\(1\.0, 3\.0"):
        dataclasses.replace(cfg, gravity_factor=(1.0, 3.0, 1.0, 1.0, 1.0, 1.0))
    with pytest.raises(ConfigError, match="dynamixel"):
        dataclasses.replace(load_config(bus="dynamixel"), gravity_factor=(1.0,) * 6)


ARM = [i for i in range(14) if i % 7 != 6]   # the arms' joints, not the grippers


def _hold_error(cfg, settle_below: float | None = None, converge: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A driver on emulated motors under gravity holds POSE for 3 s: (|measured - commanded|,
    measured), each (14,). 3 s: the emulated motor relaxes towards its goal only when a frame reaches it, and
    this machine's host stops a CPU for ~100 ms at a time (1.5 s left joint 2's sag 10 % short in 4 of 6 runs).
    `settle_below`: hold up to 3 s more while the last 10 ticks' median error of an arm joint is above it (a CI
    run under load saw 0.064 rad at joint 2 after 3 s with feed-forward: frames reach the emulator late there,
    so it had not yet come back from the first ticks, whose feed-forward waits for a measured pose). `converge`:
    hold up to 3 s more while the arm's error still moves (the last 10 ticks' median against the 10 before, by
    more than 2 mrad): a full-suite run under load left joint 2's sag without feed-forward at 0.087 rad after 3 s,
    still on its way to the ~0.19 rad fixed point)."""
    cfg = dataclasses.replace(cfg, reply_timeout_ms=20.0, max_tracking_error=1.0)
    with EmulatedRig(cfg, initial=POSE, load_fn=gravity_load(cfg)) as rig:
        driver = YamDriver(rig.config)
        driver.start()
        try:
            errors, positions = [], []
            for tick in range(180):
                if tick >= 90:
                    last = np.median(errors[-10:], axis=0)[ARM]
                    moving = converge and np.abs(last - np.median(errors[-20:-10], axis=0)[ARM]).max() > 0.002
                    if (settle_below is None or last.max() < settle_below) and not moving:
                        break
                driver.set_targets(POSE)
                rep = driver.step()
                errors.append(np.abs(rep.position - rep.commanded))
                positions.append(rep.position)
                time.sleep(1 / 30)
            assert not driver.faults, driver.faults
            # the median over the last 10 ticks: one tick whose exchange the loaded host delayed is no hold
            return np.median(errors[-10:], axis=0), np.median(positions[-10:], axis=0)
        finally:
            driver.shutdown()


@pytest.mark.adapter
def test_emulated_arm_under_gravity_holds_with_feedforward_and_sags_without():
    cfg = dataclasses.replace(load_config(bus="damiao"), gravity_factor=(1.0,) * 6)
    with_ff, _ = _hold_error(cfg, settle_below=0.02)
    without, sagged = _hold_error(dataclasses.replace(cfg, gravity_factor=(0.0,) * 6), converge=True)
    # the sagged pose is the fixed point q = q* - tau_g(q) / kp
    sag = np.abs(GravityModel(cfg).torque(sagged)) / np.array([j.kp for _, j in cfg.joints])
    arm = ARM
    # with feed-forward the emulated arm holds (bar 0.02 rad, the MuJoCo hold test's is 0.03; a full-suite run saw
    # 0.0104 at joint 2 once: the emulator integrates over the host's clock, which this machine's host stops for
    # ~100 ms at a time); without it, joint 2 sags by > 0.05 rad (below)
    assert with_ff[arm].max() < 0.02, with_ff
    # tau_g / kp, within quantisation and 25 %: the emulator's load is quasi-static (evaluated at the measured pose
    # when a frame arrives), so its sag approaches the fixed point in steps whose timing is the host's
    np.testing.assert_allclose(without[arm], sag[arm], rtol=0.25, atol=0.015)
    assert without[1] > 0.05          # joint 2 at this reach: > 2.5x the hold bar (loaded runs saw 0.086-0.087)
