"""Episodes of the mocked LIBERO bridge spread over worker processes (`eval --workers`, `bench eval`).

Every episode is independent: its environment comes from (suite, task, repetition, seed id) and
its policy noise from the same key (`SimRunner` reseeds the policy per episode), so an episode's
outcome does not depend on which worker ran it or what ran before it. Each worker builds its
policy once (per checkpoint, preset, device, backend and temperature) and switches the guidance
schedule and weights per job through `VamPolicy.configure`. Results come back in job order.

Threads: `threads` torch intra-op threads and onnxruntime threads per worker. On this 2-core
machine two workers of one thread each keep both cores busy through the environment steps,
which one process with two threads leaves idle.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Callable

from .libero_mock.runner import SimConfig, SimRunner

_POLICIES: dict[tuple, object] = {}   # in a worker: one built policy per model key
_THREADS = 0


def default_workers() -> int:
    """One worker per core the process may use."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _init(threads: int) -> None:
    global _THREADS
    _THREADS = threads
    if threads:
        import torch   # lazy: only a worker that sets its threads needs it (a scripted policy's never does)

        torch.set_num_threads(threads)


def _policy(cfg: SimConfig):
    """The worker's policy for `cfg` (built on first use), set to `cfg`'s guidance."""
    key = (cfg.checkpoint, cfg.preset, cfg.device, cfg.backend, cfg.action_temperature)
    policy = _POLICIES.get(key)
    if policy is None:
        policy = _POLICIES[key] = SimRunner.policy_for_run(
            cfg.checkpoint, cfg.preset, "libero64", cfg.label, cfg.seed, cfg.device, cfg.backend,
            cfg.action_temperature, cfg.guidance_weights, threads=_THREADS,
            warm=cfg.executor == "realtime" and not cfg.virtual_latency_ms)
    policy.configure(guidance=cfg.guidance)
    return policy


def _run_job(cfg: SimConfig, out: str, index: int) -> dict:
    policy = _policy(cfg) if cfg.policy == "vam" else None
    with SimRunner(cfg, out, policy=policy, overwrite=True) as runner:
        return runner.run_episode(index)


def run_parallel(jobs: list[tuple[SimConfig, Path, int]], workers: int, threads: int = 1,
                 on_result: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Run `jobs` ((run config, output directory, episode index) each) on `workers` processes;
    `on_result(job index, episode)` as each finishes (in the caller's process). Returns the
    episodes in job order. A worker's exception is re-raised here, naming the job."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    results: list[dict | None] = [None] * len(jobs)
    ctx = mp.get_context("spawn")        # no forked torch or onnxruntime thread pools
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init, initargs=(threads,)) as pool:
        pending = {pool.submit(_run_job, cfg, str(out), i): n for n, (cfg, out, i) in enumerate(jobs)}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    n = pending.pop(fut)
                    try:
                        results[n] = fut.result()
                    except Exception as e:
                        cfg, _, i = jobs[n]
                        raise RuntimeError(f"episode {i} of {cfg.suite}/{cfg.label} seed {cfg.seed} failed in a "
                                           f"worker: {type(e).__name__}: {e}") from e
                    if on_result is not None:
                        on_result(n, results[n])
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    return results
