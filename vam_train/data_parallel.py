"""The Trainer's collective operations for data parallel (cfg.ranks > 1: gradients averaged over the
ranks, rank 0's clock broadcast, a check that the ranks stay in step); no-ops with one rank.
The process group itself is set up by distributed.py, which builds the Trainer."""
from __future__ import annotations

import torch
import torch.distributed as dist


class DataParallel:
    """The Trainer's collective operations (no-ops with one rank)."""

    # ---- data parallel (cfg.ranks > 1) --------------------------------------------------------
    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean of `x` over the ranks (x itself in one process)."""
        if self.ranks == 1:
            return x
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
        t = torch.tensor([value], dtype=torch.float64, device=self.device)   # (NCCL moves device tensors only)
        dist.broadcast(t, 0)
        return float(t[0])

    def _check_in_step(self) -> None:
        """Raise when the ranks' weights have drifted apart (they apply the same averaged steps)."""
        total = torch.stack([p.detach().double().sum() for p in self.model.parameters()]).sum().reshape(1)
        lo, hi = total.clone(), total.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        if float(hi[0] - lo[0]) > 1e-9 * max(1.0, abs(float(total[0]))):
            raise RuntimeError(f"data-parallel ranks drifted apart at step {self.step}: weight sums span "
                               f"[{float(lo[0])!r}, {float(hi[0])!r}]")
