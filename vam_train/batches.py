"""Training data: the dataset(s) a run trains on, checked against the preset, and the batches of
every step (a step's clips, frames and noise depend only on (seed, step))."""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from vam_stack.config import ConfigError
from vam_stack.views import fit_views

from vam_data.dataset import PHASE_CODES, Dataset
from .train_config import TrainConfig

CALIBRATION_STEP = 2**31 - 1  # data "step" of the tokenizer-calibration batch (never a training step)


# ---- data ---------------------------------------------------------------------------------
def load_train_data(cfg: TrainConfig) -> Dataset:
    """`cfg.dataset` with the episodes of `cfg.extra_datasets` appended; an extra directory whose frame
    shape or action type differs from the first one's is refused before any training."""
    suites = list(cfg.suites) or None
    data = Dataset(cfg.dataset, suites)
    for extra in cfg.extra_datasets:
        other = Dataset(extra, suites)
        for key in ("frame_shape", "action_type"):
            if other.info.get(key) != data.info.get(key):
                raise ConfigError(f"train.extra_datasets: {str(other.root)!r} has {key} {other.info.get(key)!r}, "
                                  f"train.dataset {str(data.root)!r} has {data.info.get(key)!r}")
        data.extend(other)
    return data


def check_dataset_fits(data: Dataset, mcfg) -> None:
    """Refuse a dataset whose actions, proprio or action type the preset cannot learn from."""
    r = mcfg.robot
    a_dim = len(data.stats.get("action_mean", []))
    p_dim = len(data.stats.get("proprio_mean", []))
    if (a_dim, p_dim) != (r.action_dim, r.proprio_dim):
        raise ConfigError(f"dataset {str(data.root)!r} has {a_dim}-dim actions and {p_dim}-dim proprio; preset "
                          f"{mcfg.name!r} takes {r.action_dim} and {r.proprio_dim}")
    if data.absolute_actions != (r.action_type == "absolute_joint"):
        raise ConfigError(f"dataset {str(data.root)!r} holds {data.info.get('action_type', 'eef_delta')!r} actions; "
                          f"preset {mcfg.name!r} outputs {r.action_type!r}")


class Batches:
    """Batch `step` = samples drawn by a generator seeded with (seed, step); prefetched in a thread."""

    def __init__(self, data: Dataset, cfg: TrainConfig, texts: dict[str, torch.Tensor], chunk: int, frames: int,
                 image_hw: tuple[int, int], views: int = 2, skip: int = 1):
        self.data, self.cfg, self.texts, self.chunk, self.frames = data, cfg, texts, chunk, frames
        self.skip = skip                # the preset's frame skip: the clip takes every skip-th recorded frame
        self.image_hw = image_hw        # the model's input size; stored frames are resized when they differ
        self.views = views              # side-by-side views in a stacked frame
        self.p = None                   # per-sample probabilities (None = uniform)
        self.pin = False                # pin batches in page-locked memory (set by a CUDA trainer)
        self.shard = (0, 1)             # (rank, ranks): this process assembles its slice of every batch
        recovery = [e.meta.get("source") == "recovery" for e in data.episodes]
        starts = [e.meta.get("train_from", 0) for e in data.episodes]  # no sample starts before (a scripted miss)
        if cfg.planning_weight != 1.0 or (any(recovery) and cfg.recovery.weight != 1.0) or any(starts):
            phase = np.concatenate([e.phase for e in data.episodes])
            w = np.where(phase == PHASE_CODES["planning"], cfg.planning_weight, 1.0)
            w = w * np.repeat(np.where(recovery, cfg.recovery.weight, 1.0), [len(e) for e in data.episodes])
            w = w * np.concatenate([np.arange(len(e)) >= s for e, s in zip(data.episodes, starts)])
            self.p = w / w.sum()

    def _frames(self, clip: np.ndarray) -> np.ndarray:
        h, w = self.image_hw
        return fit_views(clip, self.views, w // self.views, h)  # the camera path's rule: view by view

    def make(self, step: int, whole: bool = False) -> dict:
        """Batch `step` (this rank's slice of it unless `whole`): the draw depends on (seed, step) only,
        so the ranks' slices are disjoint parts of the one batch a single process would take."""
        rng = np.random.default_rng([self.cfg.seed, step])
        if self.p is None:
            idx = rng.integers(0, len(self.data), self.cfg.batch)
        else:
            idx = rng.choice(len(self.data), self.cfg.batch, p=self.p)
        rank, ranks = self.shard
        if not whole and ranks > 1:
            n = len(idx) // ranks
            idx = idx[rank * n:(rank + 1) * n]
        samples = [self.data.sample(int(i), self.frames, self.chunk, self.skip) for i in idx]
        batch = {
            "frames": torch.from_numpy(np.stack([self._frames(s["frames"]) for s in samples])),  # [B, F, H, W, 3]
            "text": torch.cat([self.texts[s["instruction"]] for s in samples]),            # [B, L, text_in]
            "state": torch.from_numpy(np.stack([self.data.normalise("proprio", s["proprio"]) for s in samples])),
            "actions": torch.from_numpy(np.stack([self.data.normalise("action", s["actions"]) for s in samples])),
        }
        if self.pin:                                     # page-locked: the copy to the GPU overlaps compute
            batch = {k: v.pin_memory() for k, v in batch.items()}
        return batch

    def iterate(self, start: int, stop: int):
        """(step, batch) for start <= step < stop, in order, assembled `loader_threads` at a time
        up to 2 x loader_threads steps ahead; closing the generator early cancels what is queued."""
        depth = 2 * self.cfg.loader_threads
        with ThreadPoolExecutor(self.cfg.loader_threads, thread_name_prefix="batches") as pool:
            pending: deque = deque()
            nxt = start
            try:
                while True:
                    while nxt < stop and len(pending) < depth:
                        pending.append((nxt, pool.submit(self.make, nxt)))
                        nxt += 1
                    if not pending:
                        return
                    step, fut = pending.popleft()
                    yield step, fut.result()
            finally:
                for _, fut in pending:
                    fut.cancel()


