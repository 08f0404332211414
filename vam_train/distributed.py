"""Data parallel on the CPU: `ranks` processes (torch.distributed over gloo) each assemble their
slice of every batch; gradients are averaged, rank 0's clock decides stage and stop, rank 0
alone writes the run."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from .dataset import Dataset
from .train_config import TrainConfig


class DataParallel:
    """The Trainer's collective operations (no-ops with one rank)."""

    # ---- data parallel (cfg.ranks > 1) --------------------------------------------------------
    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean of `x` over the ranks (x itself in one process)."""
        if self.ranks == 1:
            return x
        import torch.distributed as dist

        x = x.clone()
        dist.all_reduce(x)
        return x / self.ranks

    def _average_grads(self, params: list[torch.Tensor]) -> None:
        """Replace each gradient by its mean over the ranks (one all-reduce of the flattened grads):
        every rank's loss is a mean over its equal share, so this is the whole batch's gradient.
        A parameter without a gradient has none on every rank (the same graph) and keeps none, so
        the optimiser skips it as in one process."""
        live = [p for p in params if p.grad is not None]
        if not live:
            return
        flat = self._mean(torch.cat([p.grad.reshape(-1) for p in live]))
        k = 0
        for p in live:
            p.grad = flat[k:k + p.numel()].view_as(p).clone()
            k += p.numel()

    def _broadcast(self, value: float) -> float:
        """Rank 0's value of a float, on every rank (the clock that decides stage and stop)."""
        if self.ranks == 1:
            return value
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64)
        dist.broadcast(t, 0)
        return float(t[0])

    def _check_in_step(self) -> None:
        """Raise when the ranks' weights have drifted apart (they apply the same averaged steps)."""
        import torch.distributed as dist

        total = torch.stack([p.detach().double().sum() for p in self.model.parameters()]).sum().reshape(1)
        lo, hi = total.clone(), total.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        if float(hi[0] - lo[0]) > 1e-9 * max(1.0, abs(float(total[0]))):
            raise RuntimeError(f"data-parallel ranks drifted apart at step {self.step}: weight sums span "
                               f"[{float(lo[0])!r}, {float(hi[0])!r}]")



def fit_data_parallel(cfg: TrainConfig, out: str | Path, resume: bool = False, ship: str | None = None,
                      data: Dataset | None = None, model_cfg=None) -> None:
    """Train with cfg.ranks CPU processes (torch.multiprocessing.spawn, gloo over a file rendezvous in
    a fresh temporary directory); rank 0 writes OUT and, with `ship`, the shipped copy. A rank that
    fails ends the others (spawn terminates them) and its error is raised here."""
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="vam_train_ranks_") as tmp:
        mp.spawn(_rank_main, args=(cfg, str(out), resume, ship, str(Path(tmp) / "rendezvous"), data, model_cfg),
                 nprocs=cfg.ranks, join=True)


def _rank_main(rank: int, cfg: TrainConfig, out: str, resume: bool, ship: str | None, rendezvous: str,
               data: Dataset | None, model_cfg) -> None:
    import torch.distributed as dist

    from .trainer import Trainer

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=cfg.ranks)
    try:
        trainer = Trainer(cfg, out, data=data, model_cfg=model_cfg, rank=rank)
        if resume:
            trainer.load_state()
            if rank == 0:
                print(f"resumed at step {trainer.step} ({trainer.elapsed / 60:.1f} min trained)", flush=True)
        result = trainer.fit()
        if rank == 0:
            print(json.dumps(result | {"ranks": cfg.ranks}), flush=True)
            if ship:
                path = trainer.export(Path(ship))
                print(f"shipped {path} ({path.stat().st_size / 1e6:.1f} MB)")
    finally:
        dist.destroy_process_group()


