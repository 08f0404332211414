"""wall_clock mode: the deadline-paced driver loop and the threaded camera bridge on host time."""
import argparse
import threading
import time

import numpy as np
import pytest

from vam_bench import yam_mujoco as bench
from vam_sim.yam_mujoco.robot import build_sim_robot
from vam_sim.yam_mujoco.sim import RenderUnavailable


@pytest.fixture
def rt_robot():
    r = build_sim_robot(task="tray_lift", step_mode="wall_clock")
    try:
        r.sim.render("top")
    except RenderUnavailable as e:
        r.close()
        pytest.skip(f"offscreen rendering unavailable here: {e}")
    yield r
    r.close()


@pytest.mark.adapter
def test_driver_run_and_bridge_thread_advance_physics_with_the_host_clock(rt_robot):
    sim = rt_robot.sim
    driver, bridge = rt_robot.driver(), rt_robot.bridge()
    bridge.connect()
    bridge.start()
    present = driver.start()
    goal = present.copy()
    goal[0] += 0.1
    stop = threading.Event()

    def publisher():  # a policy publishing fresh targets, as the executor's sink would
        while not stop.is_set():
            driver.set_targets(goal)
            stop.wait(0.02)

    pub = threading.Thread(target=publisher, daemon=True)
    pub.start()
    t0 = time.monotonic()
    try:
        stats = driver.run(duration_s=0.4, handle_signals=False)
    finally:
        stop.set()
        pub.join()
        bridge.stop()
    elapsed = time.monotonic() - t0
    assert stats.ticks >= 2 and stats.stop_reason == "duration"
    assert 0.0 < sim.time <= elapsed + 0.05  # simulated time follows the host clock, never runs ahead
    assert driver.mode.value == "stopped" and not sim.torque_enabled
    frames = [s.stats.frames for s in bridge.sources]
    assert min(frames) >= 1, frames
    newest = bridge.ring.newest_stamp()
    assert newest is not None and abs(newest - time.monotonic()) < 5.0  # stamps on the host clock
    bridge.close()


@pytest.mark.adapter
def test_bench_prints_physics_and_render_time_per_tick(capsys, render_ok, tmp_path):
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    out = tmp_path / "bench.json"
    assert bench.run(p.parse_args(["--task", "tray_lift", "--ticks", "3", "--json", str(out)])) == 0
    text = capsys.readouterr().out
    assert "render_3_views" in text and "physics" in text and "real time" in text
    import json

    res = json.loads(out.read_text())
    assert res["physics_steps_per_tick"] == 17 and res["view_size"] == [224, 168]
    assert all(np.isfinite(v["mean_ms"]) for v in res["parts"].values())
