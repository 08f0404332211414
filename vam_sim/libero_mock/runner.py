"""Closed loop without ROS: policy -> chunk executor -> mocked LIBERO environment.

Per episode: the environment's stacked camera frame (fitted to the preset's views) is the
policy's current frame, the executor asks the policy for a chunk, and each step's action goes to the
environment. In lockstep and on the virtual clock the policy runs inside the policy node's own control
loop (`PolicyDriver`: `vam_control.build.build_runtime`, a stepped `PolicyRuntime`), and realtime on
the wall clock runs that runtime's own tick thread, so its holds and e-stop gate are the robot's in
every mode. Telemetry of every replan goes
to the TR monitor core (the expert's phase labels shade the plot) and, with the camera
frames, proprio and actions, to one rosbag2 MCAP recording on the topics the ROS nodes use.

Two executor modes (`SimConfig.executor`):
- `lockstep`: the simulation waits for each replan (a new chunk every `execute` = 10 steps),
  so an episode is deterministic and its result does not depend on the machine's speed;
  every reported success rate is measured this way.
- `realtime`: the environment steps at its own 20 Hz on the wall clock, driven by the
  executor's tick thread, while the policy infers in a worker thread on the newest frames.
  A chunk that arrives late is latency-compensated; while none is ready the arm holds (zero
  motion, gripper kept). Per episode it reports the achieved rate, ticks the clock missed,
  ticks held for want of a chunk, ticks run past `execute`, and the replan latency.

`SimConfig.image_transport` "compressed" passes every stacked frame through the JPEG encode and
decode of the ROS path's compressed camera topic (`vam_stack.image_msgs.jpeg_roundtrip`, quality
`jpeg_quality`) before the policy sees it: the closed-loop cost of image_transport's compressed
transport between the camera and the policy computer.

Failed replans are counted, never hidden: every policy episode reports `inference_errors`
(replans whose inference raised; the arm held meanwhile), `refused_inputs` (those of them where
the policy refused its input with a ValueError) and `first_error`; an episode in which no chunk
was ever installed although inference was tried ends with termination "error", not "timeout".
`summarise` totals them per run. Every check that can fail (preset fit, `execute`) runs in
`SimRunner.__enter__` before the recorder opens, so a refused run writes nothing.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vam_control.build import build_runtime
from vam_control.executor import check_rtc_method
from vam_control.runtime import PolicyRuntime, RuntimeConfig
from vam_control.schedule import libero_config
from vam_stack import image_msgs, topics
from vam_stack.config import check
from vam_stack.views import fit_views, view_layout_problem

from ..episode import (EpisodeRunner, episode_seed, policy_seed, PolicyEpisode, RealtimeLoop, realtime_problem,
                       realtime_timing, runtime_episode)
from ..run_config import RunConfig, cli

from .config import LiberoMockConfig
from .env import LiberoMockEnv, make_env
from .expert import expert_action
from .reach import ReachTracker
from .tasks import canonical_suite

log = logging.getLogger(__name__)

IMAGE_TRANSPORTS = ("raw", "compressed")
OVERLOAD = ("report", "lockstep")


@dataclass(frozen=True)
class SimConfig(RunConfig):
    """One run on the mocked LIBERO bridge (or real LIBERO): the shared run settings (RunConfig) and the suite."""

    episodes: int = 10               # episodes; episode i runs task i % 10, repetition i // 10
    suite: str = "goal"              # one of SUITES (LIBERO's names accepted: libero_10, 10, ...)
    first_task: int = field(default=0, metadata=cli("--first-task", "task index of the first episode", type=int))
    #                                  task index of episode 0 (tasks cycle from here)
    mock_config: str | None = field(default=None, metadata=cli(
        "--mock-config", "mocked LIBERO YAML (default config/libero_mock.yaml)"))
    lockstep_delay: int = 0          # lockstep: a replan takes this many ticks of simulated time (ExecutorConfig)
    reanchor: bool = True            # a chunk installed d ticks late gets back the displacement it skipped but the
                                     # arm did not run (ExecutorConfig.reanchor; realtime and lockstep_delay > 0)
    virtual_latency_ms: float = 0.0  # realtime: > 0 runs the realtime executor on a virtual clock (deterministic,
                                     # no threads): every replan takes exactly this long (ChunkExecutor.virtual_step)
    overload: str = "report"         # realtime on the wall clock, an episode in which this machine could not keep real
                                     # time (episode.realtime_problem): report = it stands, the run says so | lockstep =
                                     # it runs again in lockstep, and so does every later episode of the run
    image_transport: str = field(default="raw", metadata=cli(
        "--image-transport", "libero robots, vam: raw frames, or compressed: every stacked frame JPEG-encoded and "
                             "decoded before the policy sees it, as over the ROS path's "
                             "/camera/stacked/image_raw/compressed", choices=IMAGE_TRANSPORTS))
    #                                  vam: raw frames | compressed: each frame JPEG-encoded and decoded (image_msgs.jpeg_roundtrip)
    jpeg_quality: int = field(default=image_msgs.JPEG_QUALITY_DEFAULT, metadata=cli(
        "--jpeg-quality", f"with --image-transport compressed: JPEG quality in [1, 100] (default "
                          f"{image_msgs.JPEG_QUALITY_DEFAULT}, image_transport's)", type=int, metavar="Q"))

    def __post_init__(self):
        super().__post_init__()
        try:                                     # LIBERO's names (libero_10, 10, ...) are accepted
            object.__setattr__(self, "suite", canonical_suite(self.suite))
        except ValueError as e:
            check(False, str(e))
        check(0 <= self.first_task < 10, f"first_task must be in [0, 9], got {self.first_task!r}")
        check(isinstance(self.lockstep_delay, int) and self.lockstep_delay >= 0,
              f"lockstep_delay must be an integer >= 0, got {self.lockstep_delay!r}")
        check(isinstance(self.reanchor, bool), f"reanchor must be true or false, got {self.reanchor!r}")
        check(math.isfinite(self.virtual_latency_ms) and self.virtual_latency_ms >= 0,
              f"virtual_latency_ms must be finite and >= 0, got {self.virtual_latency_ms!r}")
        check(self.virtual_latency_ms == 0 or self.executor == "realtime",
              f"virtual_latency_ms {self.virtual_latency_ms!r} runs the realtime executor on a virtual clock; "
              f"executor is {self.executor!r}")
        check(self.overload in OVERLOAD, f"overload must be one of {OVERLOAD}, got {self.overload!r}")
        check(self.overload == "report" or (self.executor == "realtime" and not self.virtual_latency_ms),
              f"overload {self.overload!r} falls back from a wall-clock realtime run; executor is "
              f"{self.executor!r}" + (" on a virtual clock" if self.virtual_latency_ms else ""))
        check(self.image_transport in IMAGE_TRANSPORTS,
              f"image_transport must be one of {IMAGE_TRANSPORTS}, got {self.image_transport!r}")
        check(self.image_transport == "raw" or self.policy == "vam",
              f"image_transport {self.image_transport!r} changes what the vam policy sees; the scripted expert "
              f"reads no images")
        check(type(self.jpeg_quality) is int and 1 <= self.jpeg_quality <= 100,
              f"jpeg_quality must be an integer in [1, 100], got {self.jpeg_quality!r}")
        check(self.image_transport == "compressed" or self.jpeg_quality == image_msgs.JPEG_QUALITY_DEFAULT,
              f"jpeg_quality {self.jpeg_quality!r} is a setting of image_transport 'compressed'; "
              f"{self.image_transport!r} frames are not encoded")


def _require_eef_delta(policy) -> None:
    spec = policy.spec
    if spec.action_type != "eef_delta" or spec.action_dim != 7:
        raise ValueError(f"the LIBERO bridge needs a 7-dim eef_delta policy, got "
                         f"{spec.action_dim}-dim {spec.action_type!r} (preset {policy.mcfg.name!r})")


def check_policy_fits(policy, image_size: int, views: int = 2) -> None:
    """Refuse, before any episode, a policy that cannot act on the LIBERO bridge's frames: it must
    take 7-dim eef deltas and `views` views of the rendered views' aspect (sizes may differ: the
    camera path resizes each view, `vam_stack.views.fit_views`)."""
    _require_eef_delta(policy)
    r = policy.mcfg.robot
    if len(r.cameras) != views:
        raise ValueError(f"preset {policy.mcfg.name!r} takes {len(r.cameras)} views {list(r.cameras)}; "
                         f"the LIBERO bridge gives {views} (agentview, wrist)")
    problem = view_layout_problem((image_size, views * image_size, 3), views, r.camera_width, r.camera_height)
    if problem is not None:
        raise ValueError(f"preset {policy.mcfg.name!r} cannot use the bridge's {image_size}x{image_size} views: {problem}")


def driver_config(policy, execute: int | None = None, mode: str = "lockstep", rtc: str = "off",
                  lockstep_delay: int = 0, reanchor: bool = True):
    """The chunk executor's configuration for `policy` on the bridge (ConfigError on a bad `execute`)."""
    _require_eef_delta(policy)
    check_rtc_method(policy, rtc)
    spec = policy.spec
    execute = spec.execute if execute is None else execute
    return libero_config(chunk=spec.chunk, execute=execute, rate_hz=spec.rate_hz, mode=mode, rtc=rtc,
                         lockstep_delay=lockstep_delay, reanchor=reanchor)


class PolicyDriver:
    """The policy side of the closed loop on the mocked bridge: the current frame and proprio feeding
    the policy node's own control loop (`vam_control.build.build_runtime`: a `PolicyRuntime` with its
    e-stop gate for deltas). Lockstep (default) and the realtime executor on a virtual clock
    (`virtual`) step it on a clock of one period per step: `act(obs)` per step, a new chunk every
    `execute` steps (virtual: `observe(obs)` then `step(latency_s)`). Realtime on the wall clock
    (`sink` given): the runtime's own tick thread, as on the robot: `observe(obs)` per step, and
    `with driver.running():` the episode runs, each tick's action going to `sink` (the world's step)
    after the runtime's gate. Frames are fitted to the preset's view size on the way in (after the
    JPEG round trip of the compressed camera topic when `jpeg_quality` is given), and `fitted` is
    what the policy saw (for recordings). `close()` ends the runtime."""

    def __init__(self, policy, instruction: str, execute: int | None = None,
                 sink: Callable[[np.ndarray], Any] | None = None, jpeg_quality: int | None = None,
                 rtc: str = "off", lockstep_delay: int = 0, virtual: bool = False, reanchor: bool = True):
        """`execute` overrides the preset's replan interval (1..chunk actions); `jpeg_quality`: frames
        reach the policy JPEG-encoded and decoded at this quality (None: raw); `virtual`: the realtime
        executor stepped on a virtual clock (`executor.virtual_step`), no sink and no threads."""
        wall = sink is not None
        cfg = driver_config(policy, execute, "realtime" if wall or virtual else "lockstep", rtc, lockstep_delay,
                            reanchor)
        self.instruction = instruction
        self._proprio: np.ndarray | None = None
        self._jpeg_quality = jpeg_quality
        self._t, self._dt, self._sent = 0.0, 1.0 / float(cfg.rate_hz), []
        self._last: np.ndarray | None = None   # stepped: the last action sent
        d = RuntimeConfig()
        params = {"rt_priority": 0, "rtc": rtc, "max_frame_age_s": d.max_frame_age_s,
                  "max_state_age_s": d.max_state_age_s, "on_overrun": d.on_overrun,
                  "command_timeout_s": 600.0}   # a start embeds the instruction: a loaded machine may take long
        stepped = dict(clock=lambda: self._t, stepped=True) if not wall else {}   # wall: time.monotonic, tick thread
        self.runtime: PolicyRuntime = build_runtime(
            policy, params, sink if wall else self._sent.append, lambda tel: None, fit_views=fit_views,
            delta_hold=HOLD_OPEN, executor={"mode": cfg.mode, "execute": cfg.execute, "lockstep_delay": lockstep_delay,
                                            "reanchor": reanchor}, **stepped).runtime
        self.executor = self.runtime.executor
        if not wall:
            ok, message = self.runtime.request_start(instruction, wait=True)
            if not ok:
                self.close()
                raise RuntimeError(f"the policy's runtime did not start the episode: {message}")

    def running(self):
        """Realtime on the wall clock: a context in which the episode runs (the runtime's tick thread calls
        `sink` each tick) until the block ends, then stops (the arm holds). `observe` the reset observation
        first."""
        return runtime_episode(self.runtime, self.instruction, "the mocked bridge")

    @property
    def fitted(self) -> np.ndarray | None:
        """The current frame as the policy sees it (None before the first `observe`)."""
        return None if self._proprio is None else self.runtime.current_frame()

    def observe(self, obs: dict) -> None:
        """The observation's frame (fitted to the preset's views there, as the node's camera path
        does) and its proprio, into the runtime."""
        frame = obs["stacked"]
        if self._jpeg_quality is not None:       # as the policy node decodes the compressed stacked topic
            frame = image_msgs.jpeg_roundtrip(frame, self._jpeg_quality)
        self.runtime.add_frame(frame)
        self.runtime.set_state(topics.LIBERO_PROPRIO_NAMES, obs["proprio"])
        self._proprio = obs["proprio"]

    def step(self, latency_s: float = 0.0):
        """Stepped: one tick of the runtime (virtual: every replan takes `latency_s`); returns (the action it
        sent [7], executor StepInfo). When it sent none (its episode stopped: an e-stop) the bridge holds as
        its node does without a fresh action: no motion, the last gripper command kept."""
        self._sent.clear()
        _, info = self.runtime.step(latency_s)
        self._t += self._dt
        if self._sent:
            self._last = self._sent[-1]
        else:
            self._last = np.zeros(7) if self._last is None else np.r_[np.zeros(6), self._last[6]]
        return self._last.copy(), info

    def act(self, obs: dict):
        """Lockstep: push the observation; returns (action [7], executor StepInfo)."""
        self.observe(obs)
        return self.step()

    def close(self) -> None:
        """End the runtime's control thread (and, realtime, its tick thread)."""
        self.runtime.close()


# realtime hold before the first chunk: no motion, gripper open (-1), as the episode starts
HOLD_OPEN = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)


def episode_name(suite: str, task: int, episode: int, seed: int) -> str:
    return f"{suite}_t{task:02d}_e{episode:03d}_s{seed}"


class SimRunner(EpisodeRunner):
    """Runs episodes of one suite with one policy on the mocked bridge (`vam_sim.episode` keeps
    the output directory, the recording and the per-episode records).

    The directory is created, and the recorder opened, in `__enter__` once every check has
    passed."""

    def __init__(self, cfg: SimConfig, out: str | Path, policy: Any = None,
                 progress: Callable[[dict], None] | None = None, overwrite: bool = False):
        super().__init__(out, record=cfg.record, plots=cfg.plots, policy=policy, overwrite=overwrite)
        self.mock = LiberoMockConfig.load(cfg.mock_config)   # the one environment configuration
        self.cfg = cfg
        self.progress = progress
        self.fell_back: dict | None = None   # overload lockstep: {episode, problem, load_1min} once it fell back

    @property
    def jpeg_quality(self) -> int | None:
        """The JPEG quality frames pass through before the policy (None: raw frames)."""
        return self.cfg.jpeg_quality if self.cfg.image_transport == "compressed" else None

    def _policy_for_run(self):
        c = self.cfg
        return self.policy_for_run(c.checkpoint, c.preset, "libero64", c.label, c.seed, c.device, c.backend,
                                 c.action_temperature, c.guidance_weights,
                                 warm=c.executor == "realtime" and not c.virtual_latency_ms)

    def __enter__(self):
        if self.cfg.policy == "vam" and self.policy is None:
            self.policy = self._policy_for_run()
        if self.cfg.policy == "vam":                  # every check that can fail, before anything is written
            check_policy_fits(self.policy, self.mock.image_size)
            driver_config(self.policy, self.cfg.execute, self.cfg.executor, self.cfg.rtc, self.cfg.lockstep_delay,
                          self.cfg.reanchor)
            if self.cfg.overload == "lockstep":           # the executor it falls back to
                driver_config(self.policy, self.cfg.execute, "lockstep", self.cfg.rtc, 0, self.cfg.reanchor)
        self.open_outputs()
        return self

    # ---- one episode ------------------------------------------------------------------------
    def run_episode(self, index: int) -> dict:
        """Episode `index`. With `overload: lockstep`, a realtime episode in which this machine could not
        keep real time runs again in lockstep (its realtime attempt under `realtime_attempt`), and from
        then on every episode of the run is stepped in lockstep (`fell_back` says where and why)."""
        c = self.cfg
        if c.policy != "vam" or c.executor != "realtime" or c.virtual_latency_ms:
            return self._run_episode(index, c.executor)
        if self.fell_back is not None:
            return self._run_episode(index, "lockstep") | {"executor": "lockstep"}
        result = self._run_episode(index, "realtime") | {"executor": "realtime"}
        # (an episode whose inference raised held for want of chunks too: that is the policy, not the clock)
        problem = None if result.get("inference_errors") else realtime_problem(result.get("realtime"))
        if problem is None or c.overload != "lockstep":
            return result
        self.fell_back = {"episode": result["name"], "problem": problem,
                          "load_1min": (result.get("realtime") or {}).get("load_1min")}
        log.warning("%s: this machine could not keep real time (%s); it and the rest of the run go in lockstep",
                    result["name"], problem)
        attempt = {k: result.get(k) for k in ("success", "steps", "termination", "realtime")} | {"problem": problem}
        return self._run_episode(index, "lockstep") | {"executor": "lockstep", "realtime_attempt": attempt}

    def _run_episode(self, index: int, executor: str) -> dict:
        c = self.cfg
        task = (c.first_task + index) % 10
        rep = index // 10
        env = make_env(c.suite, task, rep, c.seed, render=True, cfg=self.mock)
        if c.max_steps is not None:
            env.max_steps = min(env.max_steps, c.max_steps)
        name = episode_name(c.suite, task, rep, c.seed)
        result = {"name": name, "suite": c.suite, "task": task, "task_name": env.task.name,
                  "instruction": env.instruction, "seed": c.seed, "episode": rep, "policy": c.policy,
                  "guidance": c.label if c.policy == "vam" else None, "success": False, "steps": 0,
                  "termination": None, "replans": []}
        with env:
            obs = env.reset()
            if c.policy == "vam":
                result.update(self._run_vam(env, obs, result, executor))
            else:
                result.update(self._run_expert(env, obs))
        return result

    def _record_step(self, step: int, obs: dict, action: np.ndarray | None, dt: float,
                     image: np.ndarray | None = None) -> None:
        """Record one step; `image` is the frame the policy saw (default: the rendered one)."""
        if self.recorder is None:
            return
        t = self.stamp(step * dt)
        if step % self.cfg.record_image_every == 0:
            self.recorder.write_image("stacked_image", obs["stacked"] if image is None else image, t)
        self.recorder.write_joint_state("joint_states", topics.LIBERO_PROPRIO_NAMES, obs["proprio"], t)
        if action is not None:
            self.recorder.write_joint_state("joint_targets", topics.LIBERO_ACTION_NAMES, action, t)

    def _run_expert(self, env: LiberoMockEnv, obs: dict) -> dict:
        dt = 1.0 / env.control_hz
        step, info = 0, {"termination": None, "success": False}
        reach = ReachTracker(env)
        reach.update()
        while not env.done:
            action = expert_action(env)
            self._record_step(step, obs, action, dt)
            obs, _, _, info = env.step(action)
            reach.update()
            step += 1
        out = {"success": bool(info["success"]), "steps": step, "termination": info["termination"],
               "reach": reach.summary()}
        self.finish_recording(out | {"suite": env.task.suite, "task": env.task.index, "instruction": env.instruction,
                                     "seed": env.seed, "episode": env.episode}, step * dt)
        return out

    def _run_vam(self, env: LiberoMockEnv, obs: dict, result: dict, executor: str) -> dict:
        ep = _VamEpisode(self, env, obs, result["name"])
        # the episode's own noise stream: the same draws whichever episodes ran before it or in which
        # worker process, so runs (and schedules) pair episode by episode
        self.policy.reseed(policy_seed(episode_seed(f"{result['suite']}/{result['task']}", result["episode"],
                                                    result["seed"])))
        try:
            if self.cfg.virtual_latency_ms:
                ep.run_virtual(self.cfg.virtual_latency_ms / 1e3)
            elif executor == "lockstep":
                ep.driver = PolicyDriver(self.policy, env.instruction, self.cfg.execute,
                                         jpeg_quality=self.jpeg_quality, rtc=self.cfg.rtc,
                                         lockstep_delay=self.cfg.lockstep_delay, reanchor=self.cfg.reanchor)
                while not env.done:
                    action, sinfo = ep.driver.act(ep.obs)
                    if ep.tick(action, sinfo):
                        break
                    if self.progress is not None:
                        self.progress({"step": ep.step, "max_steps": env.max_steps})
            else:
                ep.run_realtime()
        finally:
            if ep.driver is not None:
                ep.driver.close()
        step = ep.step
        out = ep.log.outcome(ep.driver.executor, ep.info["success"], step, ep.info["termination"])
        if ep.realtime is not None:
            out["realtime"] = ep.realtime
        if ep.reach is not None:
            out["reach"] = ep.reach.summary()
        title = f"{result['name']}: {env.instruction} ({'success' if out['success'] else out['termination']})"
        ep.log.add_plot(out, title, step)
        self.finish_recording(result | out, step / env.control_hz)
        return out


class _VamEpisode:
    """One policy episode on the mocked bridge, the same in both executor modes: one environment
    step per tick, its records in `log` (a `PolicyEpisode`) and its reach statistics."""

    def __init__(self, runner: SimRunner, env: LiberoMockEnv, obs: dict, name: str):
        self.runner, self.env, self.obs, self.name = runner, env, obs, name
        self.driver: PolicyDriver | None = None
        self.dt = 1.0 / env.control_hz
        self.log: PolicyEpisode = runner.new_episode(name, self.dt)
        self.step = 0
        self.info = {"termination": None, "success": False}
        self.reach = ReachTracker.for_env(env)
        if self.reach is not None:
            self.reach.update()
        self.realtime: dict | None = None

    def tick(self, action: np.ndarray, sinfo) -> bool:
        """Step the environment with `action` (executor StepInfo `sinfo`); True once the episode is over."""
        r, env, step = self.runner, self.env, self.step
        self.log.on_step(step, env.last_info["phase"], sinfo)   # the phase is computed by reset()/step() already
        r._record_step(step, self.obs, action, self.dt, image=self.driver.fitted)
        try:
            self.obs, _, _, self.info = env.step(action.astype(np.float32))
        except ValueError as e:        # the env recorded the bad action as the termination reason
            log.error("%s step %d: %s", self.name, step, e)
            self.info = env.last_info
            return True
        if self.reach is not None:
            self.reach.update()
        self.step += 1
        return env.done

    def run_virtual(self, latency_s: float) -> None:
        """The realtime executor on a virtual clock: one environment step per virtual tick, every
        replan taking exactly `latency_s` (deterministic, whatever the machine's load)."""
        r, env = self.runner, self.env
        self.driver = PolicyDriver(r.policy, env.instruction, r.cfg.execute, jpeg_quality=r.jpeg_quality,
                                   rtc=r.cfg.rtc, virtual=True, reanchor=r.cfg.reanchor)
        executor = self.driver.executor
        while not env.done:
            self.driver.observe(self.obs)
            action, sinfo = self.driver.step(latency_s)
            if self.tick(action, sinfo):
                break
            if r.progress is not None:
                r.progress({"step": self.step, "max_steps": env.max_steps})
        self.realtime = self.log.realtime_record(realtime_timing(executor) | {"ticks": self.step,
                                                                              "virtual_latency_ms": 1e3 * latency_s})

    def run_realtime(self) -> None:
        """The environment at its own rate on the wall clock, stepped by the executor's tick thread."""
        r, env = self.runner, self.env

        def step(action: np.ndarray) -> bool:
            over = self.tick(action, self.driver.executor.last_info)
            if not over:
                self.driver.observe(self.obs)
            return over

        loop = RealtimeLoop(step, self.name)
        self.driver = PolicyDriver(r.policy, env.instruction, r.cfg.execute, sink=loop.sink, jpeg_quality=r.jpeg_quality,
                                   rtc=r.cfg.rtc, reanchor=r.cfg.reanchor)
        self.driver.observe(self.obs)
        progress = None if r.progress is None else (lambda: r.progress({"step": self.step, "max_steps": env.max_steps}))
        timing, stalled = loop.run(self.driver.executor, env.max_steps, progress, running=self.driver.running())
        if stalled:                        # the tick thread has stopped: nothing else writes `info`
            self.info = {"termination": "stalled", "success": False}
        self.realtime = self.log.realtime_record(timing)
