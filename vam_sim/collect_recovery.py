"""Recovery rounds' rollouts (DAgger-style) in the simulators: the policy drives, the scripted expert
takes over, its segments become a dataset. vam_train/recovery.py documents the round and owns its
configuration; the trainer calls `collect_mock_round` / `collect_yam_round` through the `rollouts`
it is given (`vam-stack train` gives it this module), so training code imports no simulator.
"""
from __future__ import annotations

import copy
import multiprocessing as mp
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from vam_stack.views import fit_views
from vam_data.dataset import YAM_INFO, DatasetWriter, encode_demo
from vam_model.policy import build_policy
from vam_sim.collect import bridge_info
from vam_sim.libero_mock import LiberoMockConfig, make_env, record_expert
from vam_sim.libero_mock.runner import PolicyDriver
from vam_train.recovery import NothingKept, RecoveryConfig, takeover_steps


def recovery_segments(policy, suite: str, task: int, episode: int, seed: int, takeovers: list[int],
                      mock=None) -> dict:
    """Run `policy` on one episode, branching an expert takeover at each step of `takeovers`.

    Returns {"demos": [Demo per takeover the expert finished], "takeover_steps": [...],
    "policy_steps": steps the policy ran, "policy_termination": env termination or None,
    "expert_failures": n}.
    """
    env = make_env(suite, task, episode, seed, render=True, cfg=mock)
    obs = env.reset()
    driver = PolicyDriver(policy, env.instruction)
    pending = sorted(set(takeovers))
    snapshots, step = [], 0
    try:
        while not env.done and pending:
            if step == pending[0]:
                snapshots.append((step, copy.deepcopy(env), obs))
                pending.pop(0)
                if not pending:
                    break
            action, _ = driver.act(obs)
            obs, _, _, _ = env.step(action.astype(np.float32))
            step += 1
    finally:
        driver.close()
    out = {"demos": [], "takeover_steps": [], "policy_steps": step, "policy_termination": env.termination,
           "expert_failures": 0}
    for k, snap, snap_obs in snapshots:
        demo = record_expert(snap, snap_obs)
        if demo.success:
            out["demos"].append(demo)
            out["takeover_steps"].append(k)
        else:
            out["expert_failures"] += 1
    return out


def collect_round(policy, cfg: RecoveryConfig, suites: list[str], round_index: int, out: str | Path,
                  progress: Callable[[int, int], None] | None = None, mock=None) -> dict:
    """One recovery round with `policy`, written as a dataset at `out`; returns its summary.

    Episode `e` of a task in round `r` uses initial-state episode index r * episodes_per_task + e
    (seed id `cfg.seed`), so every round sees new states; takeover steps are drawn from a
    generator seeded with (seed, round, task, e). `mock` is the environment configuration (the
    training data's; None = config/libero_mock.yaml).
    """
    mock = mock if mock is not None else LiberoMockConfig.load()
    writer = DatasetWriter(out)
    execute = policy.spec.execute
    rollouts = expert_failures = policy_success = 0
    t0 = time.perf_counter()
    total = len(suites) * 10 * cfg.episodes_per_task
    for suite in suites:
        for task in range(10):
            for e in range(cfg.episodes_per_task):
                rng = np.random.default_rng([cfg.seed, round_index, task, e])
                episode = round_index * cfg.episodes_per_task + e
                res = recovery_segments(policy, suite, task, episode, cfg.seed, takeover_steps(cfg, execute, rng), mock)
                rollouts += 1
                policy_success += res["policy_termination"] == "success"
                expert_failures += res["expert_failures"]
                for demo, k in zip(res["demos"], res["takeover_steps"]):
                    writer.add(demo, source="recovery", takeover_step=k, round=round_index)
                if progress is not None:
                    progress(rollouts, total)
    summary = {"round": round_index, "rollouts": rollouts, "episodes": len(writer.metas), "frames": writer.frames,
               "policy_success_before_takeover": policy_success, "expert_failures": expert_failures,
               "seconds": round(time.perf_counter() - t0, 1)}
    if not writer.metas:
        raise NothingKept(f"recovery round {round_index}: no expert takeover finished its task in {rollouts} "
                          f"rollouts ({expert_failures} expert failures); nothing to learn from", summary)
    writer.close(bridge_info(mock) | {"suites": list(suites), "seed": cfg.seed, "source": "recovery"} | summary)
    return summary


def collect_mock_round(checkpoint: str | Path, cfg: RecoveryConfig, suites: list[str], round_index: int,
                       out: str | Path, progress: Callable[[int, int], None] | None = None, mock: dict | None = None,
                       policy_seed: int = 0) -> dict:
    """`collect_round` with the weights at `checkpoint` (guidance `cfg.guidance`) in the mocked LIBERO
    configuration `mock` (the training data's meta/info.json "mock"; None = config/libero_mock.yaml)."""
    policy = build_policy(checkpoint=checkpoint, guidance=cfg.guidance, seed=policy_seed)
    return collect_round(policy, cfg, suites, round_index, out, progress=progress,
                         mock=LiberoMockConfig.from_dict(mock) if mock is not None else None)


# ---- the simulated bimanual YAM ----------------------------------------------------------------
_WORKER_POLICY = None  # the rollout policy of a round's worker process (built once per process)


def _init_yam_worker(checkpoint: str, guidance: str, seed: int, threads: int) -> None:
    global _WORKER_POLICY
    torch.set_num_threads(threads)
    _WORKER_POLICY = build_policy(checkpoint=checkpoint, guidance=guidance, seed=seed)


def yam_takeover_episode(job: tuple) -> tuple[dict, object]:
    """(task, episode, seed, takeover tick, view (w, h), sim_config) -> (outcome, stored segment or None).

    The worker's policy drives the simulated YAM (lockstep, the real robot path) from the
    episode's initial state; at the takeover tick the scripted expert takes over (if no gripper
    is near an object yet) and finishes. The segment is the expert's part: the policy's own
    off-course state first, labelled with the expert's targets."""
    from vam_sim.collect_yam import _Demo                               # MuJoCo: loaded for a YAM round only
    from vam_sim.yam_mujoco.runner import YamRunConfig, YamSimRunner   # MuJoCo, as above

    task, episode, seed, k, (vw, vh), sim_config = job
    frames, proprio, actions, phases = [], [], [], []

    def capture(step, stacked, prop, action, phase):
        if step >= k:                                   # the expert's ticks only
            frames.append(fit_views(stacked, 3, vw, vh))
            proprio.append(np.asarray(prop, np.float32))
            actions.append(np.asarray(action, np.float32))
            phases.append(phase)

    cfg = YamRunConfig(task=task, episodes=episode + 1, seed=seed, guidance="none", record=False, plots=False,
                       sim_config=sim_config, takeover_step=k)
    with tempfile.TemporaryDirectory(prefix="yam_recovery_") as tmp:
        with YamSimRunner(cfg, tmp, policy=_WORKER_POLICY, capture=capture) as runner:
            result = runner.run_episode(episode)
    outcome = {"task": task, "episode": episode, "takeover_step": k, "taken": result["takeover"]["taken"],
               "termination": result["termination"], "success": bool(result["success"])}
    if not (outcome["taken"] and outcome["success"]):
        return outcome, None
    demo = _Demo("yam_mujoco", task, episode, seed, result["instruction"], True, np.stack(frames),
                 np.stack(proprio), np.stack(actions), phases)
    return outcome, encode_demo(demo)


def collect_yam_round(checkpoint: str | Path, cfg: RecoveryConfig, tasks: list[str], round_index: int,
                      out: str | Path, view: tuple[int, int], execute: int, sim_config: str | None = None,
                      progress: Callable[[int, int], None] | None = None, policy_seed: int = 0) -> dict:
    """One recovery round on the simulated YAM with the weights at `checkpoint`, written as a
    dataset at `out` at the data's view size `view` = (w, h); returns its summary.

    Task t's episode e of round r starts from initial state r * episodes_per_task + e (seed id
    `cfg.seed`); its `takeovers` ticks are drawn from a generator seeded with (seed, round, task
    index, e), and each is a rollout of its own (the MuJoCo world is not branched). A takeover is
    kept only when the expert took over before any grasp and finished the task."""
    jobs = []
    for ti, task in enumerate(tasks):
        for e in range(cfg.episodes_per_task):
            rng = np.random.default_rng([cfg.seed, round_index, ti, e])
            episode = round_index * cfg.episodes_per_task + e
            jobs += [(task, episode, cfg.seed, k, tuple(view), sim_config) for k in takeover_steps(cfg, execute, rng)]
    writer = DatasetWriter(out)
    t0 = time.perf_counter()
    counts = {"rollouts": 0, "taken": 0, "no_takeover": 0, "policy_ended_first": 0, "expert_failures": 0}
    init = (str(checkpoint), cfg.guidance, policy_seed, 1 if cfg.workers > 1 else 2)
    pool = mp.get_context("spawn").Pool(cfg.workers, _init_yam_worker, init) if cfg.workers > 1 else None
    try:
        if pool is None:
            _init_yam_worker(*init)
        results = pool.imap(yam_takeover_episode, jobs) if pool else map(yam_takeover_episode, jobs)
        for outcome, enc in results:                # in job order for any number of workers
            counts["rollouts"] += 1
            if outcome["taken"]:
                counts["taken"] += 1
                counts["expert_failures"] += not outcome["success"]
            elif outcome["termination"] == "no_takeover":
                counts["no_takeover"] += 1
            else:
                counts["policy_ended_first"] += 1
            if enc is not None:
                writer.add(enc, source="recovery", takeover_step=outcome["takeover_step"], round=round_index)
            if progress is not None:
                progress(counts["rollouts"], len(jobs))
    finally:
        if pool is not None:
            pool.terminate()
    summary = {"round": round_index, **counts, "episodes": len(writer.metas), "frames": writer.frames,
               "seconds": round(time.perf_counter() - t0, 1)}
    if not writer.metas:
        raise NothingKept(f"recovery round {round_index}: no expert takeover finished its task in {len(jobs)} "
                          f"rollouts ({counts}); nothing to learn from", summary)
    writer.close(YAM_INFO | {"frame_shape": [view[1], 3 * view[0], 3], "tasks": list(tasks), "seed": cfg.seed,
                             "source": "recovery"} | summary)
    return summary
