"""Closed loop on the simulated YAM without ROS: policy -> executor -> safety -> driver -> MuJoCo.

Per 30 Hz tick of simulated time: the camera bridge reads the three rendered views (through
`MujocoCameraSource`) and appends one stacked 672x168 frame; the policy sees that current frame
(fitted to its views) and the measured 14 joint positions. The policy runs inside the robot's own
control loop (`vam_control.build.build_runtime`, the policy node's `PolicyRuntime`): in lockstep
stepped on the simulated clock, in realtime on its own tick thread on the wall clock (each tick
steps the world), so its replans every `execute` = 30 ticks, holds, e-stop and the safety filter's
stale and future-stamp checks (`config/yam_safety.yaml`) are the robot's; each target then goes
through the driver core (`YamDriver` with its slew limits and watchdog) onto `MujocoBus`; then
physics advances one control period. (The expert feeds its own safety filter, stamped with
simulated time.) The
scripted expert can stand in for the policy (`policy: expert`). The policy's noise generator
restarts at every episode from that episode's seed (`policy_seed`), so an episode draws the same
noise in any run of its seed id, whatever ran before it. Outputs mirror the mocked LIBERO runs: per-episode TR trace PNG, one rosbag2 MCAP, and the records for summary.json.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vam_control.build import build_runtime
from vam_control.executor import check_rtc_method
from vam_control.runtime import PolicyRuntime, RuntimeConfig
from vam_control.safety import SafetyFilter, load_safety_config
from vam_stack.config import check
from vam_stack.paths import config_dir
from vam_stack.names import NOISE_WHERE
from vam_stack.views import fit_views, view_layout_problem

from ..episode import EpisodeRunner, episode_seed, policy_seed, RealtimeLoop, runtime_episode
from ..run_config import RunConfig
from .expert import MAX_MISS_M, MISS_WHEN, make_expert, miss_offset
from .robot import SimRobot, build_sim_robot
from .tasks import TASKS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class YamRunConfig(RunConfig):
    """One run on the simulated YAM (`vam-stack sim --robot yam-mujoco`, collect, recovery rounds): the shared
    run settings (RunConfig), the task, and the scripted expert's perturbations."""

    task: str = "handover"  # vam_stack.names.YAM_TASKS; episode i is seeded by hash(task, i, seed)
    sim_config: str | None = None  # yam_mujoco YAML (default config/yam_mujoco.yaml)
    expert_noise: float = 0.0  # expert only: std [rad] of a smooth perturbation of its joint targets (not the
                               # grippers) before the safety filter; `capture` still sees the clean target
    expert_noise_tau_s: float = 0.5  # correlation time of that perturbation (Ornstein-Uhlenbeck) [s]
    expert_noise_where: str = "everywhere"  # everywhere | free_space: the perturbation fades out (time constant
                                            # expert_noise_fade_s) while the expert's phase is manipulation (a
                                            # gripper near a tracked object) and back in once it is planning again
    expert_noise_fade_s: float = 0.2  # fade time constant of free_space [s]
    expert_miss_m: float = 0.0  # expert, handover only: its first left grasp aims this far [m] off the block (a
                                # seeded direction per episode), misses, and it re-grasps: recovery in the data
    expert_miss_when: str = "before_lift"  # where the expert notices that miss: before_lift (its fingers are still
                                           # at the block) | at_meet (after carrying the empty gripper to the meeting point)
    takeover_step: int | None = None  # vam, lockstep: at this tick the scripted expert takes over from the policy
                                      # and finishes the episode (recovery rounds); it only restarts its plans
                                      # before a grasp, so a policy already in the manipulation phase there ends
                                      # the episode ("no_takeover"). The episode limit grows by the takeover tick.

    def __post_init__(self):
        super().__post_init__()
        check(self.task in TASKS, f"task must be one of {sorted(TASKS)}, got {self.task!r}")
        check(math.isfinite(self.expert_noise) and 0.0 <= self.expert_noise <= 0.2,
              f"expert_noise must be in [0, 0.2] rad, got {self.expert_noise!r}")
        check(self.expert_noise == 0.0 or self.policy == "expert",
              f"expert_noise perturbs the scripted expert only, got policy {self.policy!r}")
        check(math.isfinite(self.expert_noise_tau_s) and 0.01 <= self.expert_noise_tau_s <= 10.0,
              f"expert_noise_tau_s must be in [0.01, 10] s, got {self.expert_noise_tau_s!r}")
        check(self.expert_noise_where in NOISE_WHERE,
              f"expert_noise_where must be one of {NOISE_WHERE}, got {self.expert_noise_where!r}")
        check(math.isfinite(self.expert_noise_fade_s) and 0.01 <= self.expert_noise_fade_s <= 5.0,
              f"expert_noise_fade_s must be in [0.01, 5] s, got {self.expert_noise_fade_s!r}")
        check(math.isfinite(self.expert_miss_m) and 0.0 <= self.expert_miss_m <= MAX_MISS_M,
              f"expert_miss_m must be in [0, {MAX_MISS_M}] m, got {self.expert_miss_m!r}")
        check(self.expert_miss_m == 0.0 or (self.policy == "expert" and self.task == "handover"),
              f"expert_miss_m scripts the expert's handover, got policy {self.policy!r} and task {self.task!r}")
        check(self.expert_miss_when in MISS_WHEN,
              f"expert_miss_when must be one of {MISS_WHEN}, got {self.expert_miss_when!r}")
        check(self.expert_miss_when == "before_lift" or self.expert_miss_m > 0,
              f"expert_miss_when {self.expert_miss_when!r} places a scripted miss; expert_miss_m is 0")
        check(self.execute is None or self.policy == "vam", f"execute applies to the vam policy, got {self.policy!r}")
        if self.takeover_step is not None:
            limit = TASKS[self.task].max_steps
            check(isinstance(self.takeover_step, int) and 1 <= self.takeover_step < limit,
                  f"takeover_step must be an int tick in [1, {limit}) for {self.task}, got {self.takeover_step!r}")
            check(self.policy == "vam" and self.executor == "lockstep",
                  f"takeover_step hands a lockstep vam rollout to the expert, got policy {self.policy!r} and "
                  f"executor {self.executor!r}")


class JointNoise:
    """Smooth perturbation of the 12 arm-joint targets (Ornstein-Uhlenbeck, stationary std
    `std`, correlation time `tau_s`); the two gripper targets are left alone.

    `__call__(target, on)` scales the perturbation by a gain that follows `on` with time constant
    `fade_s` (1 while on, decaying to 0 while off), so gating it by phase never jumps the target."""

    def __init__(self, std: float, tau_s: float, dt: float, seed: int, fade_s: float = 0.2):
        self.std, self.a = std, math.exp(-dt / tau_s)
        self.fade = 1.0 - math.exp(-dt / fade_s)
        self.rng = np.random.default_rng(seed)
        self.joints = np.array([i for i in range(14) if i % 7 != 6])      # 2 x 6 arm joints
        self.x = self.rng.normal(0.0, std, self.joints.size)
        self.gain = 1.0                                                    # episodes start in free space

    def __call__(self, target: np.ndarray, on: bool = True) -> np.ndarray:
        self.x = self.a * self.x + math.sqrt(1 - self.a ** 2) * self.rng.normal(0.0, self.std, self.x.size)
        self.gain += self.fade * (float(on) - self.gain)
        out = np.array(target, dtype=np.float64)
        out[self.joints] += self.gain * self.x
        return out

    @classmethod
    def for_expert(cls, run: YamRunConfig, dt: float, seed: int) -> JointNoise | None:
        """The expert's perturbation `run` asks for (None when its expert_noise is 0), seeded from the
        episode's `seed` as `collect` seeds it (the same scene gets the same perturbation everywhere)."""
        if run.expert_noise <= 0:
            return None
        return cls(run.expert_noise, run.expert_noise_tau_s, dt, int(seed) ^ 0x5EED, run.expert_noise_fade_s)


def furthest_milestone(reached: dict[str, int | None]) -> str | None:
    """The last sub-goal, in the task's order, that an episode reached (None: not even the first)."""
    done = [k for k, step in reached.items() if step is not None]
    return done[-1] if done else None


class YamSimRunner(EpisodeRunner):
    """Runs episodes of one task; owns the simulated robot and the policy (`vam_sim.episode`
    keeps the output directory, the recording and the per-episode records).

    The output directory is created, and the recorder opened, only after the policy checks have
    passed."""

    def __init__(self, cfg: YamRunConfig, out: str | Path, policy: Any = None, overwrite: bool = False,
                 capture: Callable[[int, np.ndarray, np.ndarray, np.ndarray, str], None] | None = None):
        """`capture(step, stacked, proprio, action, phase)`, when given, sees every tick: the stacked
        views [168, 672, 3], the proprio the actor saw [14], its commanded action [14] and the
        expert's phase label (how `vam-stack collect --robot yam-mujoco` records demonstrations)."""
        super().__init__(out, record=cfg.record, plots=cfg.plots, policy=policy, overwrite=overwrite)
        self.cfg = cfg
        self.capture = capture
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
            self.policy = self.policy_for_run(c.checkpoint, c.preset, "yam64", c.label, c.seed, c.device, c.backend,
                                            c.action_temperature, c.guidance_weights, warm=c.executor == "realtime")
        if self.policy is not None:
            spec = self.policy.spec
            check_rtc_method(self.policy, c.rtc)
            if c.execute is not None and c.execute > spec.chunk:
                raise ValueError(f"execute {c.execute} exceeds the policy's chunk of {spec.chunk} actions")
            if spec.action_type != "absolute_joint" or spec.action_dim != 14 or spec.proprio_dim != 14:
                raise ValueError(f"the simulated YAM needs a 14-dim absolute_joint policy with 14-dim proprio, got "
                                 f"{spec.action_dim}-dim {spec.action_type!r} (preset {self.policy.mcfg.name!r})")
            r = self.policy.mcfg.robot
            problem = view_layout_problem(tuple(self.robot.bridge_cfg.stacked_shape), len(r.cameras),
                                          r.camera_width, r.camera_height)
            if problem is not None:
                raise ValueError(f"preset {self.policy.mcfg.name!r} cannot use the simulated views "
                                 f"{self.robot.bridge_cfg.stacked_shape}: {problem}")
        self.open_outputs()

    def __exit__(self, *exc) -> None:
        self.close_outputs()
        if self.robot is not None:
            self.robot.close()
            self.robot = None

    # ---- one episode ------------------------------------------------------------------------
    def run_episode(self, index: int) -> dict:
        c, robot = self.cfg, self.robot
        sim, task = robot.sim, robot.sim.task
        ep_seed = episode_seed(c.task, index, c.seed)
        sim.reset(ep_seed)
        name = f"yam_{c.task}_e{index:03d}_s{c.seed}"
        max_steps = task.max_steps if c.max_steps is None else min(task.max_steps, c.max_steps)
        if c.takeover_step is not None:                 # the expert gets a whole episode after the takeover
            max_steps += c.takeover_step
        dt = 1.0 / sim.cfg.control_hz
        result = {"name": name, "suite": "yam_mujoco", "task": c.task, "instruction": task.instruction,
                  "seed": c.seed, "episode": index, "episode_seed": ep_seed, "policy": c.policy,
                  "guidance": c.label if c.policy == "vam" else None, "success": False, "steps": 0,
                  "termination": None, "replans": []}
        if c.policy == "vam":
            result["policy_seed"] = policy_seed(ep_seed)
        if c.takeover_step is not None:
            result["takeover"] = {"step": c.takeover_step, "phase": None, "taken": False}
        use_cameras = c.policy == "vam" or self.recorder is not None or self.capture is not None
        driver, bridge = robot.driver(), robot.bridge() if use_cameras else None
        sent_now: list[np.ndarray] = []              # lockstep: what the runtime sent this tick (through its filter)
        loop = RealtimeLoop(lambda sent: rt_step(sent), name) if c.executor != "lockstep" else None
        runtime = None
        if c.policy == "vam":                          # the robot's control loop: stepped on simulated time in
            runtime = (self._runtime(sim.clock, sent_now.append) if loop is None   # lockstep, else its tick thread
                       else self._runtime(time.monotonic, loop.sink, wall=True))   # steps the world on the wall clock
        safety = runtime.safety if runtime is not None else SafetyFilter(load_safety_config(), clock=sim.clock)
        ep = self.new_episode(name, dt)
        times = {"physics": [], "cameras": [], "act": []}
        st = {"step": 0, "termination": "timeout", "stacked": None, "proprio": None}
        reached: dict[str, int | None] = dict.fromkeys(task.milestones(sim))  # first tick each sub-goal held
        executor = None

        def frame() -> None:
            """The bridge's newest stacked frame into st (and into the runtime: the policy's current frame)."""
            if bridge is None:
                return
            t0 = time.perf_counter()
            tick = bridge.tick()
            latest = bridge.latest()
            times["cameras"].append(time.perf_counter() - t0)
            if not latest.ready:
                raise RuntimeError(f"camera bridge not ready at tick {st['step']}: {tick.reason or latest.reasons}")
            st["stacked"] = latest.frames[0]  # [168, 672, 3] RGB
            if runtime is not None:
                runtime.add_frame(st["stacked"])          # fitted to the policy's views as the node does

        def apply(action: np.ndarray | None, info, phase: str, label: np.ndarray | None = None,
                  sent: np.ndarray | None = None) -> bool:
            """One control tick with `action`: book it, filter, drive, record, step physics; True once over.
            `label` (the expert's clean target under `expert_noise`) is what `capture` records. `sent`: what
            the runtime already sent through its filter (None: `action` is filtered here, stamped with the
            simulated time); no action at all (the runtime's episode stopped): the driver holds its target."""
            step, t = st["step"], sim.time
            ep.on_step(step, phase, info)
            if self.capture is not None:
                self.capture(step, st["stacked"], st["proprio"], action if label is None else label, phase)
            if sent is None and action is not None:
                sent = safety.filter(action, stamp=t, now=t).sent
            if sent is not None:
                driver.set_targets(sent, stamp=t)
            report = driver.step()
            self._record(step, t, st["stacked"], driver.names, report.position,
                         sent if sent is not None else safety.last_sent)
            t0 = time.perf_counter()
            sim.step_control()
            times["physics"].append(time.perf_counter() - t0)
            st["proprio"] = report.position
            if runtime is not None:
                runtime.set_state(driver.names, report.position)
            st["step"] = step + 1
            now = task.milestones(sim)                   # every task's sub-goals end with its "success"
            for key, held in now.items():
                if held and reached[key] is None:
                    reached[key] = step + 1
            if report.new_faults:
                st["termination"] = "driver_fault"
            elif now["success"]:
                st["termination"] = "success"
            else:
                return st["step"] >= max_steps
            return True

        def run_expert(expert, noise: JointNoise | None, fresh: bool = True) -> None:
            """The scripted expert to the end of the episode; `fresh` = render before its first tick
            (False when it takes over from the policy loop, which rendered that tick's frame)."""
            while True:
                if fresh:
                    frame()
                fresh = True
                phase = task.phase(sim)
                t0 = time.perf_counter()
                action = expert.act()
                times["act"].append(time.perf_counter() - t0)
                on = c.expert_noise_where == "everywhere" or phase == "planning"
                if apply(action if noise is None else noise(action, on), None, phase, label=action):
                    return

        realtime = None
        try:
            if bridge is not None:
                bridge.connect()
            present = driver.start()
            safety.reset(present)
            st["proprio"] = present.copy()
            if runtime is not None and loop is None:      # the robot's control loop, stepped on simulated time
                runtime.set_state(driver.names, present)
                self.policy.reseed(result["policy_seed"])   # the episode's own noise stream: runs pair by episode
                frame()
                ok, message = runtime.request_start(task.instruction, wait=True)
                if not ok:
                    raise RuntimeError(f"{name}: the policy's runtime did not start the episode: {message}")
                while True:
                    phase = task.phase(sim)
                    if st["step"] == c.takeover_step:
                        result["takeover"]["phase"] = phase
                        runtime.request_stop("takeover", wait=True)
                        break
                    t0 = time.perf_counter()
                    sent_now.clear()
                    action, info = runtime.step()
                    times["act"].append(time.perf_counter() - t0)
                    if apply(action, info, phase, sent=sent_now[-1] if sent_now else None):
                        break
                    frame()
                if result.get("takeover", {}).get("phase") == "planning":
                    result["takeover"]["taken"] = True
                    run_expert(make_expert(sim, sim.cfg.control_hz, takeover=True), None, fresh=False)
                elif result.get("takeover", {}).get("phase") is not None:
                    st["termination"] = "no_takeover"
            elif c.policy == "vam":                       # realtime on the wall clock: the runtime's tick thread
                def rt_step(sent: np.ndarray) -> bool:     # one tick of the world with the runtime's filtered target
                    over = apply(sent, runtime.executor.last_info, task.phase(sim), sent=sent)
                    if not over:
                        frame()
                    return over

                runtime.set_state(driver.names, present)
                self.policy.reseed(result["policy_seed"])   # the episode's own noise stream: runs pair by episode
                frame()
                realtime, stalled = loop.run(runtime.executor, max_steps,
                                             running=runtime_episode(runtime, task.instruction, name))
                if stalled:
                    st["termination"] = "stalled"
            else:
                noise = JointNoise.for_expert(c, 1.0 / sim.cfg.control_hz, ep_seed)
                miss = miss_offset(c.expert_miss_m, ep_seed ^ 0x3155) if c.expert_miss_m > 0 else None
                expert = make_expert(sim, sim.cfg.control_hz, miss=miss, miss_when=c.expert_miss_when)
                run_expert(expert, noise)
                result["expert_regrasps"] = expert.regrasps
                result["expert_regrasp_steps"] = list(expert.inserted_at)
        finally:
            if runtime is not None:
                executor = runtime.executor
                runtime.close()
            driver.shutdown()
            if bridge is not None:
                bridge.close()
        step, termination = st["step"], st["termination"]
        out = ep.outcome(executor, termination == "success", step, termination)
        out.update({"milestones": reached, "furthest": furthest_milestone(reached),
                    "safety": {k: v for k, v in safety.counts.items() if v},
                    "driver_faults": [str(f) for f in driver.faults],
                    "timing_ms": {k: round(1e3 * float(np.mean(v)), 3) for k, v in times.items() if v}})
        if realtime is not None:
            out["realtime"] = ep.realtime_record(realtime)
        ep.add_plot(out, f"{name} ({'success' if out['success'] else out['termination']}): {task.instruction}",
                    step)
        result.update(out)
        self.finish_recording(result, step * dt)
        return result

    def _runtime(self, clock: Callable[[], float], send: Callable[[np.ndarray], None],
                 wall: bool = False) -> PolicyRuntime:
        """The policy node's control loop (`build_runtime`) around the policy: the executor at the run's
        `execute` and `rtc`, the shipped safety filter, the runtime's freshness defaults, the node's
        overrun handling ("hold"). Stepped on the simulated `clock` in lockstep; `wall`: the run's
        realtime executor on its own tick thread, on the wall `clock`, each filtered target to `send`."""
        c, spec = self.cfg, self.policy.spec
        d = RuntimeConfig()
        params = {"rt_priority": 0, "rtc": c.rtc, "max_frame_age_s": d.max_frame_age_s,
                  "max_state_age_s": d.max_state_age_s, "on_overrun": d.on_overrun,
                  "safety_config": config_dir() / "yam_safety.yaml",
                  "command_timeout_s": 600.0}   # a start embeds the instruction: a loaded machine may take long
        return build_runtime(self.policy, params, send, lambda tel: None, fit_views=fit_views, clock=clock,
                             stepped=not wall, executor={"mode": c.executor if wall else "lockstep",
                                                         "execute": c.execute or spec.execute}).runtime

    def _record(self, step: int, t: float, stacked, names, position, target) -> None:
        if self.recorder is None:
            return
        ts = self.stamp(t)
        if stacked is not None and step % self.cfg.record_image_every == 0:
            self.recorder.write_image("stacked_image", stacked, ts)
        self.recorder.write_joint_state("joint_states", names, position, ts)
        self.recorder.write_joint_state("joint_targets", names, target, ts)
