"""The generated MJCF: loads, steps, excludes neighbour contacts, the motors' law tracks targets."""
import numpy as np
import pytest

import vam_sim.yam_mujoco  # noqa: F401  (sets MUJOCO_GL=egl before mujoco is first imported)
import mujoco  # noqa: E402

from vam_stack.config import ConfigError
from vam_stack.robot import load_robot
from vam_sim.yam_mujoco.config import MujocoConfig, load_mujoco_config
from vam_sim.yam_mujoco.model import HOME, SceneSpec, build_mjcf
from yam_driver.arm_model import ARMS, FINGER_TRAVEL
from vam_sim.yam_mujoco.sim import YamSim

TRACKING_BOUND_RAD = 0.02  # after 1 s: joint friction 0.1 Nm over kp 10 Nm/rad leaves <= 0.01 rad


@pytest.mark.unit
def test_model_loads_with_yam_gains_and_limits():
    m = mujoco.MjModel.from_xml_string(build_mjcf(SceneSpec()))
    assert m.nu == 16 and m.njnt == 16  # 2 x (6 joints + 2 fingers)
    for arm in ARMS:
        kp = [m.actuator(f"{arm}_joint{i}").gainprm[0] for i in range(1, 7)]
        kd = [-m.actuator(f"{arm}_joint{i}").biasprm[2] for i in range(1, 7)]
        assert kp == [80, 80, 80, 10, 10, 10] and kd == [5, 5, 5, 1.5, 1.5, 1.5]
        assert tuple(m.joint(f"{arm}_joint2").range) == pytest.approx((0.0, 3.66519))
        # control = q* + t_ff / kp is not clipped to the joint range; torque saturates at the peak
        assert not m.actuator(f"{arm}_joint1").ctrllimited
        assert [m.actuator(f"{arm}_joint{i}").forcerange[1] for i in range(1, 7)] == [27, 27, 27, 7, 7, 7]
    assert m.body_gravcomp.max() == 0.0   # no gravity compensation the real arm does not have


@pytest.mark.unit
def test_no_self_contacts_at_rest_and_steps_stay_finite():
    sim = YamSim(MujocoConfig(task="tray_lift"))
    m, d = sim.model, sim.data
    arm_geoms = [m.geom(i).name for i in range(m.ngeom) if m.geom(i).name.startswith(ARMS)]
    assert arm_geoms
    pairs = [(m.geom(c.geom1).name, m.geom(c.geom2).name) for c in d.contact[:d.ncon]]
    assert not [p for p in pairs if p[0].startswith(ARMS) and p[1].startswith(ARMS)], pairs
    for _ in range(30):
        sim.step_control()
    assert np.isfinite(d.qpos).all() and sim.time == pytest.approx(1.0)


@pytest.mark.unit
def test_position_control_reaches_targets():
    sim = YamSim(MujocoConfig(task="handover"))
    target = np.array([0.4, 1.3, 1.2, -0.4, 0.5, 0.8, 0.5, -0.3, 1.4, 0.9, 0.3, -0.4, -0.6, 0.2])
    target[[6, 13]] *= FINGER_TRAVEL
    for _ in range(30):  # 1 s, the feed-forward a driver would send at the measured pose each tick
        sim.set_targets(target, torque_ff=sim.gravity_torque())
        sim.step_control()
    pos, vel, eff = sim.state()
    arm = sim.arm_slots
    assert np.abs(pos[arm] - target[arm]).max() < TRACKING_BOUND_RAD
    assert np.abs(pos[[6, 13]] - target[[6, 13]]).max() < 0.002  # m on the finger rail
    assert np.abs(vel).max() < 0.05 and np.isfinite(eff).all()


@pytest.mark.unit
def test_torque_off_lets_the_arm_sag_and_back_on_holds():
    sim = YamSim(MujocoConfig(task="handover"))
    sim.set_torque(False)
    for _ in range(15):
        sim.step_control()
    sagged = sim.state()[0][1]
    assert abs(sagged - HOME[1]) > 0.05
    sim.set_torque(True)
    assert sim.torque_enabled


@pytest.mark.unit
def test_config_errors_quote_the_value(tmp_path):
    with pytest.raises(ConfigError, match="'stacking'"):
        MujocoConfig(task="stacking")
    with pytest.raises(ConfigError, match="'later'"):
        MujocoConfig(step_mode="later")
    with pytest.raises(ConfigError, match="'front'"):
        MujocoConfig(cameras=("top", "front"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("yam_mujoco:\n  taks: handover\n")
    with pytest.raises(ConfigError, match="did you mean 'task'"):
        load_mujoco_config(bad)
    assert MujocoConfig().substeps == 17 and MujocoConfig().physics_dt == pytest.approx(1 / 510)


@pytest.mark.unit
def test_control_rate_is_the_robots(tmp_path):
    """config/yam_robot.yaml's rate_hz is the simulator's tick; a file that still states one must agree."""
    assert load_mujoco_config().control_hz == MujocoConfig().control_hz == load_robot().rate_hz == 30.0
    old = tmp_path / "old.yaml"
    old.write_text("yam_mujoco:\n  control_hz: 30.0\n")
    assert load_mujoco_config(old).control_hz == 30.0
    old.write_text("yam_mujoco:\n  control_hz: 50.0\n")
    with pytest.raises(ConfigError, match=r"old.yaml \[yam_mujoco\]: yam_mujoco control_hz 50.0 differs from the "
                                          r"robot's control rate 30.0 \(config/yam_robot.yaml"):
        load_mujoco_config(old)
