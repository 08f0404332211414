"""Recovery demonstrations (DAgger-style): the expert takes over from states the policy reaches.

Behaviour cloning only shows the policy the expert's own states; once its first chunk is a
little off it sees states no demonstration covers and repeats the mistake instead of
correcting it. A recovery round fixes the data, not the model:

    for every task of the dataset's suites, `episodes_per_task` seeded episodes:
        run the current policy (no guidance) in the mocked LIBERO bridge;
        at `takeovers` replan boundaries (steps drawn from [first_takeover, last_takeover]),
        snapshot the environment;
    from each snapshot the scripted expert (a pure function of the state) finishes the task,
    and that expert segment is one recovery episode: its first frames are the policy's own
    off-course states, labelled with the expert's correcting actions.

On the simulated bimanual YAM (`collect_yam_round`, for a yam_mujoco dataset) the MuJoCo world is
not branched: each takeover is a rollout of its own from the episode's initial state, run through
the real robot path in lockstep. The YAM expert's timeline cannot resume a half-done grasp, so it
takes over only while no gripper is near an object yet (the phase labeller's "planning"); it then
restarts its plans from where the arms and objects are. A rollout already manipulating at the
takeover tick yields nothing. Rollouts run in `workers` processes.

Segments the expert fails to finish are dropped; a policy that ends the episode before a
takeover step (solved or timed out) yields fewer segments. The trainer runs a round at each
progress fraction in `at`, writes it as an ordinary dataset under OUT/recovery/round_<r>/
(episode lines carry "source": "recovery" and "takeover_step"), and samples its steps with
`weight` relative to a demonstration step. Its minutes count against the time budget.

The rollouts run in the simulators (vam_sim/collect_recovery.py: `collect_round`,
`collect_yam_round`); the trainer reaches them through the `Rollouts` it is given, so this
module, like all of vam_train, imports no simulator.
"""
from __future__ import annotations

import copy
import json
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import torch

from vam_stack.config import check
from vam_stack.progress import progress_bar

from vam_data.dataset import Dataset
from vam_stack.names import GUIDANCE_SCHEDULES as SCHEDULES


class NothingKept(RuntimeError):
    """A recovery round in which no expert takeover finished its task: nothing to learn from.
    `summary` holds the round's counts; the trainer logs it and trains on without the round."""

    def __init__(self, message: str, summary: dict):
        super().__init__(message)
        self.summary = summary


@dataclass(frozen=True)
class RecoveryConfig:
    at: tuple[float, ...] = ()       # training progress fractions (0, 1) at which a round runs (empty = off)
    episodes_per_task: int = 4       # policy rollouts per task of each dataset suite, per round
    takeovers: int = 2               # expert takeovers branched from each rollout (distinct replan steps; on the
                                     # simulated YAM each takeover is its own rollout from the same initial state)
    first_takeover: int = 10         # earliest takeover step (a multiple of the executed chunk length)
    last_takeover: int = 60          # latest takeover step
    seed: int = 200                  # seed id of the rollouts' initial states (collect uses 100, eval 0)
    weight: float = 2.0              # sampling weight of a recovery step relative to a demonstration step
    guidance: str = "none"           # guidance of the rollout policy (none is the cheapest)
    workers: int = 1                 # simulated YAM only: rollout processes (the trainer waits, so its cores are free)

    def __post_init__(self):
        at = tuple(self.at)
        check(all(0.0 < a < 1.0 for a in at), f"train.recovery.at: fractions must be in (0, 1), got {self.at!r}")
        check(list(at) == sorted(set(at)), f"train.recovery.at must be strictly increasing, got {self.at!r}")
        check(self.episodes_per_task >= 1, f"train.recovery.episodes_per_task must be >= 1, got {self.episodes_per_task!r}")
        check(self.takeovers >= 1, f"train.recovery.takeovers must be >= 1, got {self.takeovers!r}")
        check(1 <= self.first_takeover <= self.last_takeover,
              f"train.recovery: need 1 <= first_takeover <= last_takeover, got {self.first_takeover!r}, "
              f"{self.last_takeover!r}")
        check(self.seed >= 0, f"train.recovery.seed must be >= 0, got {self.seed!r}")
        check(self.weight > 0 and math.isfinite(self.weight), f"train.recovery.weight must be > 0, got {self.weight!r}")
        check(self.guidance in SCHEDULES, f"train.recovery.guidance must be one of {SCHEDULES}, got {self.guidance!r}")
        check(isinstance(self.workers, int) and 1 <= self.workers <= 64,
              f"train.recovery.workers must be an int in [1, 64], got {self.workers!r}")


def takeover_steps(cfg: RecoveryConfig, execute: int, rng: np.random.Generator) -> list[int]:
    """`cfg.takeovers` distinct replan-boundary steps in [first_takeover, last_takeover], sorted."""
    lo = math.ceil(cfg.first_takeover / execute) * execute
    grid = np.arange(lo, cfg.last_takeover + 1, execute)
    if len(grid) == 0:
        raise ValueError(f"recovery: no multiple of the executed chunk ({execute} steps) lies in "
                         f"[{cfg.first_takeover}, {cfg.last_takeover}]")
    k = min(cfg.takeovers, len(grid))
    return sorted(int(s) for s in rng.choice(grid, k, replace=False))


class Rollouts(Protocol):
    """Where a round's rollouts run: a simulator's collection (vam_sim/collect_recovery.py, which
    `vam-stack train` passes to the Trainer). Each writes the kept segments as a dataset at `out`
    and returns the round's summary, or raises NothingKept."""

    def collect_mock_round(self, checkpoint: str | Path, cfg: RecoveryConfig, suites: list[str], round_index: int,
                           out: str | Path, progress: Callable[[int, int], None] | None = None,
                           mock: dict | None = None, policy_seed: int = 0) -> dict: ...

    def collect_yam_round(self, checkpoint: str | Path, cfg: RecoveryConfig, tasks: list[str], round_index: int,
                          out: str | Path, view: tuple[int, int], execute: int, sim_config: str | None = None,
                          progress: Callable[[int, int], None] | None = None, policy_seed: int = 0) -> dict: ...


class RecoveryRounds:
    """The Trainer's recovery rounds: roll out the current EMA weights, let the expert take over,
    merge the kept segments into the training data (OUT/recovery/round_<r>/)."""

    def _round_dir(self, r: int) -> Path:
        return self.out / "recovery" / f"round_{r}"

    def _merge_recovery(self, r: int) -> None:
        summary = self._round_dir(r) / "summary.json"
        if summary.is_file() and json.loads(summary.read_text()).get("episodes") == 0:
            self.recovery_rounds = r + 1                 # a round that kept nothing: done, no data to merge
            return
        if not self._data_private:                       # extend a private copy, never the caller's dataset
            self._data_private = True
            self.data = copy.copy(self.data)
            self.data.episodes = list(self.data.episodes)
        self.data.extend(Dataset(self._round_dir(r) / "data"))
        self.recovery_rounds = r + 1
        if self.cfg.cache_frames:
            self._cache_frames()
        self.batches = self._make_batches()

    def recovery_due(self) -> bool:
        at = self.cfg.recovery.at
        return self.recovery_rounds < len(at) and self.progress(self.step) >= at[self.recovery_rounds]

    def recovery_round(self, progress: bool = True) -> dict:
        """Roll out the current EMA weights, let the expert take over, merge the segments into the data.
        A round that kept no takeover is recorded (summary.json with the reason) and counted as done:
        the run trains on with the data it had instead of losing the minutes already spent."""
        r = self.recovery_rounds
        root = self._round_dir(r)
        if root.exists():                                # a round interrupted before it was merged
            shutil.rmtree(root)
        root.mkdir(parents=True)
        ckpt = self.export(root / "policy.safetensors")  # the weights that drove the rollouts
        suites = sorted({e.meta["suite"] for e in self.data.episodes})
        try:
            if suites == ["yam_mujoco"]:
                summary = self._yam_recovery_round(ckpt, r, root, progress)
            else:
                summary = self._mock_recovery_round(ckpt, r, root, suites, progress)
        except NothingKept as e:
            summary = e.summary | {"error": str(e)}
        (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")   # read by the merge
        self._merge_recovery(r)
        return summary

    def _mock_recovery_round(self, ckpt: Path, r: int, root: Path, suites: list[str], progress: bool) -> dict:
        """A round on the mocked LIBERO bridge (rollouts.collect_mock_round) the data came from."""
        rc = self.cfg.recovery
        bar = progress_bar(total=len(suites) * 10 * rc.episodes_per_task, unit="rollout", desc=f"recovery round {r}",
                           disable=not progress, file=sys.stdout, leave=False)
        try:                                         # recovery rollouts run in the mock the data came from
            return self.rollouts.collect_mock_round(ckpt, rc, suites, r, root / "data",
                                                    progress=lambda k, n: bar.update(1),
                                                    mock=self.data.info.get("mock"), policy_seed=self.cfg.seed + r)
        finally:
            bar.close()
            torch.set_num_threads(self.cfg.threads)      # the policy sets its own thread count

    def _yam_recovery_round(self, ckpt: Path, r: int, root: Path, progress: bool) -> dict:
        """A round on the simulated YAM (rollouts.collect_yam_round) for the data's tasks, at its view size."""

        rc, robot = self.cfg.recovery, self.mcfg.robot
        tasks = list(self.data.info.get("tasks") or sorted({e.meta["task"] for e in self.data.episodes}))
        h, w, _ = self.data.info["frame_shape"]
        bar = progress_bar(unit="rollout", desc=f"recovery round {r}", disable=not progress, file=sys.stdout,
                           leave=False)

        def tick(done: int, total: int) -> None:          # the round knows its rollout count
            bar.total = total
            bar.update(done - bar.n)

        try:
            return self.rollouts.collect_yam_round(ckpt, rc, tasks, r, root / "data", (w // len(robot.cameras), h),
                                                   robot.execute, progress=tick, policy_seed=self.cfg.seed + r)
        finally:
            bar.close()
            torch.set_num_threads(self.cfg.threads)

