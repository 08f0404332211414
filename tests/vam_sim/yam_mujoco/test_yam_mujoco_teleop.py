"""The scripted teleoperator (`ExpertTeleop`) on the simulated arm, without ROS: the raw command is
the expert's clean target, the executed one carries collect's perturbation."""
import numpy as np
import pytest

from vam_sim.yam_mujoco.robot import build_sim_robot
from vam_sim.yam_mujoco.runner import JointNoise
from vam_sim.yam_mujoco.teleop import ExpertTeleop
from vam_control.safety import SafetyFilter, load_safety_config

ARM = np.array([i for i in range(14) if i % 7 != 6])
GRIPPERS = np.array([6, 13])


def _run(noise_std: float, ticks: int, seed: int = 7, where: str = "everywhere"):
    """`ticks` teleop ticks closed through the driver; (commands, targets, teleop)."""
    robot = build_sim_robot(task="handover", seed=seed)
    try:
        sim = robot.sim
        driver = robot.driver()
        safety = SafetyFilter(load_safety_config(), clock=sim.clock)
        noise = JointNoise(noise_std, 0.5, 1.0 / sim.cfg.control_hz, seed ^ 0x5EED) if noise_std > 0 else None
        tele = ExpertTeleop(sim, safety, noise, where)
        tele.start(driver.start())
        commands, targets = [], []
        for _ in range(ticks):
            t = sim.clock()
            tick = tele.tick(stamp=t, now=t)
            commands.append(tick.command)
            targets.append(tick.target)
            driver.set_targets(tick.target, stamp=t)
            driver.step()
            sim.step_control()
        driver.shutdown()
        return np.array(commands), np.array(targets), tele
    finally:
        robot.close()


@pytest.mark.sim
def test_teleop_noise_perturbs_what_runs_and_records_the_clean_command():
    clean_cmd, clean_tgt, _ = _run(0.0, 40)
    noisy_cmd, noisy_tgt, _ = _run(0.03, 40)
    # without noise the filter passes the expert's command (it stays in range and within a step)
    np.testing.assert_allclose(clean_tgt, clean_cmd, atol=1e-9)
    # with noise the executed arm joints leave the command by about the noise's size; the grippers are left alone
    dev = np.abs(noisy_tgt[:, ARM] - noisy_cmd[:, ARM])
    assert 0.005 < dev.mean() < 0.1, dev.mean()
    np.testing.assert_allclose(noisy_tgt[:, GRIPPERS], noisy_cmd[:, GRIPPERS], atol=1e-9)
    # the recorded command is still the expert's plan: during the first ticks (the expert plans from the scene,
    # not from the perturbed arm) it equals the clean run's command
    np.testing.assert_allclose(noisy_cmd[:10], clean_cmd[:10], atol=1e-9)


@pytest.mark.unit
def test_teleop_refuses_an_unknown_noise_gate():
    robot = build_sim_robot(task="handover", seed=1)
    try:
        with pytest.raises(ValueError, match="'nowhere'"):
            ExpertTeleop(robot.sim, SafetyFilter(load_safety_config()), None, "nowhere")
    finally:
        robot.close()


@pytest.mark.unit
def test_the_expert_noise_is_seeded_as_collect_seeds_it():
    from vam_sim.yam_mujoco.runner import YamRunConfig

    assert JointNoise.for_expert(YamRunConfig(policy="expert"), 1 / 30, 5) is None
    run = YamRunConfig(policy="expert", expert_noise=0.03)
    a, b = JointNoise.for_expert(run, 1 / 30, 5), JointNoise(0.03, run.expert_noise_tau_s, 1 / 30, 5 ^ 0x5EED,
                                                              run.expert_noise_fade_s)
    np.testing.assert_array_equal(a(np.zeros(14)), b(np.zeros(14)))


@pytest.mark.sim
def test_the_teleop_session_waits_for_joints_and_the_operator_then_starts_once():
    from vam_sim.yam_mujoco.teleop import TeleopSession
    from vam_stack.robot import load_robot

    robot = build_sim_robot(task="handover", seed=3)
    try:
        sim, driver = robot.sim, robot.driver()
        names = load_robot().published_names()
        session = TeleopSession(ExpertTeleop(sim, SafetyFilter(load_safety_config(), clock=sim.clock)), names)
        assert session.request_start() == (False, "no /joint_states yet: is the driver up?")
        with pytest.raises(ValueError, match="lacks"):
            session.observe(names[:13], np.zeros(13))
        measured = driver.start()
        session.observe(list(reversed(names)), measured[::-1])     # reordered to the target order
        np.testing.assert_array_equal(session.measured, measured)
        ok, message = session.request_start()
        assert ok and message.startswith("teleoperating 'handover'") and session.due_to_start
        assert session.request_start() == (False, "teleop already started (restart the world for another episode)")
        assert session.status()["message"] == "waiting for ~/start_teleop"
        session.start()
        assert not session.due_to_start
        first = session.step(sim.clock())
        assert first.new_phase == first.tick.phase and not first.finished
        second = session.step(sim.clock())
        assert second.new_phase is None                          # said once, when it changes
        status = session.status()
        assert status["message"] == "teleoperating" and status["values"]["ticks"] == 2
        driver.shutdown()
    finally:
        robot.close()
