"""Closed loop on the simulated YAM without ROS: policy -> executor -> safety -> driver -> MuJoCo.

Per 30 Hz tick of simulated time: the camera bridge reads the three rendered views (through
`MujocoCameraSource`) and appends one stacked 672x168 frame; the policy sees a 17-frame window
with frame-skip 3 (padded with the first frame at episode start) and the measured 14 joint
positions; the chunk executor (lockstep) replans every `execute` = 30 ticks; each target goes
through the safety filter (`config/yam_safety.yaml`) and the driver core (`YamDriver` with its
slew limits and watchdog) onto `MujocoBus`; then physics advances one control period. The
scripted expert can stand in for the policy (`policy: expert`). Outputs mirror the mocked
LIBERO runs: per-episode TR trace PNG, one rosbag2 MCAP, and the records for summary.json.
"""
from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from camera_bridge.window import FrameRing
from vam_stack.config import check

from ..episode import EpisodeRunner
from .expert import make_expert
from .robot import SimRobot, build_sim_robot
from .tasks import TASKS

log = logging.getLogger(__name__)

POLICIES = ("vam", "expert")


@dataclass(frozen=True)
class YamRunConfig:
    """One `vam-stack sim --robot yam-mujoco` run."""

    task: str = "handover"  # vam_sim.yam_mujoco.tasks.TASKS
    episodes: int = 1  # episode i is seeded by hash(task, i, seed)
    seed: int = 0  # seed id
    guidance: str = "tr_adaptive"  # none | flat | tr_adaptive
    policy: str = "vam"  # vam (video-action model) | expert (scripted, privileged state)
    preset: str | None = None  # model preset; None: tiny_real (real-robot geometry) without a checkpoint, the checkpoint's own with one
    checkpoint: str | None = None  # safetensors checkpoint (default: models/<preset>.safetensors if shipped)
    record: bool = True  # write DIR/recording.mcap
    record_image_every: int = 1  # write every k-th stacked frame to the MCAP
    plots: bool = True  # write DIR/<episode>/tr_trace.png
    max_steps: int | None = None  # cap on episode ticks (smoke runs); None = the task's limit
    sim_config: str | None = None  # yam_mujoco YAML (default config/yam_mujoco.yaml)

    def __post_init__(self):
        check(self.task in TASKS, f"task must be one of {sorted(TASKS)}, got {self.task!r}")
        check(self.episodes >= 1, f"episodes must be >= 1, got {self.episodes!r}")
        check(self.seed >= 0, f"seed must be >= 0, got {self.seed!r}")
        check(self.policy in POLICIES, f"policy must be one of {POLICIES}, got {self.policy!r}")
        check(self.record_image_every >= 1, f"record_image_every must be >= 1, got {self.record_image_every!r}")
        check(self.max_steps is None or self.max_steps >= 1, f"max_steps must be >= 1, got {self.max_steps!r}")


def episode_seed(task: str, episode: int, seed: int) -> int:
    """Deterministic per-episode seed from (task, episode, seed id)."""
    return zlib.crc32(f"{task}:{episode}:{seed}".encode())


class YamSimRunner(EpisodeRunner):
    """Runs episodes of one task; owns the simulated robot and the policy (`vam_sim.episode`
    keeps the output directory, the recording and the per-episode records).

    The output directory is created, and the recorder opened, only after the policy checks have
    passed."""

    def __init__(self, cfg: YamRunConfig, out: str | Path, policy: Any = None, overwrite: bool = False):
        super().__init__(out, record=cfg.record, plots=cfg.plots, policy=policy, overwrite=overwrite)
        self.cfg = cfg
        self.robot: SimRobot | None = None

    def __enter__(self) -> "YamSimRunner":
        self.robot = build_sim_robot(self.cfg.sim_config, task=self.cfg.task, seed=self.cfg.seed,
                                     step_mode="external")
        try:
            self._open()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _open(self) -> None:
        c = self.cfg
        if c.policy == "vam" and self.policy is None:
            self.policy = self.build_policy(c.checkpoint, c.preset, "tiny_real", c.guidance, c.seed)
        if self.policy is not None:
            spec = self.policy.spec
            if spec.action_type != "absolute_joint" or spec.action_dim != 14 or spec.proprio_dim != 14:
                raise ValueError(f"the simulated YAM needs a 14-dim absolute_joint policy with 14-dim proprio, got "
                                 f"{spec.action_dim}-dim {spec.action_type!r} (preset {self.policy.mcfg.name!r})")
            want = (self.robot.bridge_cfg.stacked_shape[0], self.robot.bridge_cfg.stacked_shape[1])
            if (spec.height, spec.width) != want:
                raise ValueError(f"policy frames {spec.height}x{spec.width} differ from the stacked views {want}")
        self.open_outputs()

    def __exit__(self, *exc) -> None:
        self.close_outputs()
        if self.robot is not None:
            self.robot.close()
            self.robot = None

    # ---- one episode ------------------------------------------------------------------------
    def run_episode(self, index: int) -> dict:
        from vam_policy_node.executor import ChunkExecutor, robot_config
        from vam_stack.safety import SafetyFilter, load_safety_config

        c, robot = self.cfg, self.robot
        sim, task = robot.sim, robot.sim.task
        ep_seed = episode_seed(c.task, index, c.seed)
        sim.reset(ep_seed)
        name = f"yam_{c.task}_e{index:03d}_s{c.seed}"
        max_steps = task.max_steps if c.max_steps is None else min(task.max_steps, c.max_steps)
        dt = 1.0 / sim.cfg.control_hz
        result = {"name": name, "suite": "yam_mujoco", "task": c.task, "instruction": task.instruction,
                  "seed": c.seed, "episode": index, "episode_seed": ep_seed, "policy": c.policy,
                  "guidance": c.guidance if c.policy == "vam" else None, "success": False, "steps": 0,
                  "termination": None, "replans": []}
        use_cameras = c.policy == "vam" or self.recorder is not None
        driver, bridge = robot.driver(), robot.bridge() if use_cameras else None
        safety = SafetyFilter(load_safety_config(), clock=sim.clock)
        ep = self.new_episode(name, dt)
        times = {"physics": [], "cameras": [], "act": []}
        step, termination, executor = 0, "timeout", None
        try:
            if bridge is not None:
                bridge.connect()
            present = driver.start()
            safety.reset(present)
            proprio = present.copy()
            if c.policy == "vam":
                spec = self.policy.spec
                executor = ChunkExecutor(self.policy, robot_config(
                    mode="lockstep", rt_priority=0, chunk=spec.chunk, execute=spec.execute, rate_hz=spec.rate_hz),
                    initial_target=present)
                executor.reset(instruction=task.instruction)
                skip = self.policy.mcfg.robot.frame_skip
                window = FrameRing((spec.frames - 1) * skip + 1, (spec.height, spec.width, 3))
            else:
                expert = make_expert(sim, sim.cfg.control_hz)
            while step < max_steps:
                t = sim.time
                stacked = None
                if bridge is not None:
                    t0 = time.perf_counter()
                    tick = bridge.tick()
                    latest = bridge.latest()
                    times["cameras"].append(time.perf_counter() - t0)
                    if not latest.ready:
                        raise RuntimeError(f"camera bridge not ready at tick {step}: {tick.reason or latest.reasons}")
                    stacked = latest.frames[0]  # [168, 672, 3] RGB
                phase = task.phase(sim)
                t0 = time.perf_counter()
                if executor is not None:
                    window.push(stacked)
                    frames = window.window(spec.frames, skip, pad=True)  # [17, 168, 672, 3], oldest first
                    action, info = executor.next_action({"frames": frames, "proprio": proprio.astype(np.float32)})
                else:
                    action, info = expert.act(), None
                times["act"].append(time.perf_counter() - t0)
                ep.on_step(step, phase, info)
                sent = safety.filter(action, now=t)
                driver.set_targets(sent.sent, stamp=t)
                report = driver.step()
                self._record(step, t, stacked, driver.names, report.position, sent.sent)
                t0 = time.perf_counter()
                sim.step_control()
                times["physics"].append(time.perf_counter() - t0)
                proprio = report.position
                step += 1
                if report.new_faults:
                    termination = "driver_fault"
                    break
                if task.success(sim):
                    termination = "success"
                    break
        finally:
            driver.shutdown()
            if bridge is not None:
                bridge.close()
        out = ep.outcome(executor, termination == "success", step, termination)
        out.update({"safety": {k: v for k, v in safety.counts.items() if v},
                    "driver_faults": [str(f) for f in driver.faults],
                    "timing_ms": {k: round(1e3 * float(np.mean(v)), 3) for k, v in times.items() if v}})
        ep.add_plot(out, f"{name} ({'success' if out['success'] else out['termination']}): {task.instruction[:48]}",
                    step)
        result.update(out)
        self.finish_recording(result, step * dt)
        return result

    def _record(self, step: int, t: float, stacked, names, position, target) -> None:
        if self.recorder is None:
            return
        ts = self.stamp(t)
        if stacked is not None and step % self.cfg.record_image_every == 0:
            self.recorder.write_image("stacked_image", stacked, ts)
        self.recorder.write_joint_state("joint_states", names, position, ts)
        self.recorder.write_joint_state("joint_targets", names, target, ts)
