"""Real-time chunking: the next chunk continues the one being executed (guided, no retraining;
or trained, with a head that learnt to take the committed prefix).

While the policy infers, the arm keeps executing the current chunk, so the next chunk starts
`delay` ticks late. Its first `delay` actions are already decided (they run during inference)
and the rest of the current chunk is what the arm was about to do. The request carries both:
the committed actions Y (the current chunk from the request tick to its end) and the delay d.
The flow is then steered toward Y over the overlap with a soft mask W (Black, Galliker and
Levine 2025, "Real-Time Execution of Action Chunking Flow Policies"; lerobot's RTC):

    W_i = 1                                      i < d            (frozen: runs during inference)
    W_i = c_i (e^{c_i} - 1) / (e - 1),  c_i = (H_o - i) / (H_o - d + 1)    d <= i < H_o
    W_i = 0                                      i >= H_o         (past the committed actions)

with H_o = len(Y). In this project's convention (sigma = 1 noise, 0 data; x = sigma eps +
(1 - sigma) a0; v = eps - a0; an Euler step is x <- x - v / N) the denoised estimate at sigma is
x1 = x - sigma v, and the corrected velocity is

    v' = v - g(sigma) J^T [W * (Y - x1)],   J = d x1 / d x,   g = min(beta, sigma / ((1 - sigma) r^2)),
    r^2 = sigma^2 / (sigma^2 + (1 - sigma)^2)

(the paper's pseudo-inverse guidance weight, clipped at beta; at sigma = 1 it is beta). The
vector-Jacobian product J^T e is one backward pass through the action head's conditional
branch per Euler step, reusing that step's forward (vam_model/replan.py runs the conditional
branch's head call through the torch head with autograd on while a committed chunk is in force,
whatever the backend).

How it composes with guidance (one definition, `realtime_velocity`): v is the guided velocity
v_cond + w_lang (v_cond - v_null) + w_plan (v_plan - v_cond) of `combine_velocities`, x1 comes
from that v, and the Jacobian is the conditional branch's (the other branches' Jacobians are
not taken: they would double the backward passes, and the guidance terms are differences the
correction does not need to steer). TR-gated compute is untouched: TR is read from the
conditional branch's attention before the correction, over all action queries, as the paper
defines it; the correction changes the noisy actions the next step sees, not what TR measures.

Trained variant (Black et al.'s training-time action conditioning; `method: trained`): the head
is trained with the first d actions of a chunk given clean, at sigma 0, with d sampled
(vam_train/losses.py `prefix_prob`, `prefix_max`). At inference every Euler step, of every
guidance branch, sees the d committed actions clean with per-token times 0 (`clean_prefix`), and
the integrator moves those rows on the straight path to them, so the chunk starts with exactly the
committed actions; no soft mask and no backward pass. Only the frozen d
actions are given: the rest of the committed chunk is not. TR is then summed over the free
action queries only (the frozen ones are inputs, not queries), so it keeps the paper's meaning.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

VJP = Callable[[torch.Tensor], torch.Tensor]   # e [B, A, D] -> J^T e [B, A, D]


def soft_mask(horizon: int, delay: int, overlap: int) -> torch.Tensor:
    """W [horizon]: 1 on the frozen first `delay` actions, exponential decay over the rest of the
    `overlap` committed actions, 0 beyond (see the module docstring)."""
    if not 0 <= delay <= overlap <= horizon:
        raise ValueError(f"need 0 <= delay <= overlap <= horizon, got delay={delay!r} overlap={overlap!r} "
                         f"horizon={horizon!r}")
    w = torch.zeros(horizon)
    w[:delay] = 1.0
    i = torch.arange(delay, overlap, dtype=torch.float32)
    c = (overlap - i) / (overlap - delay + 1)                            # in (0, 1]
    w[delay:overlap] = c * (torch.exp(c) - 1) / (math.e - 1)
    return w                                                             # [horizon]


def guidance_weight(sigma: float, beta: float) -> float:
    """min(beta, sigma / ((1 - sigma) r^2)), r^2 = sigma^2 / (sigma^2 + (1 - sigma)^2); beta at sigma = 1."""
    if not (math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta must be finite and >= 0, got {beta!r}")
    if sigma >= 1.0:
        return beta
    if sigma <= 0.0:
        return 0.0
    r2 = sigma ** 2 / (sigma ** 2 + (1 - sigma) ** 2)
    return min(beta, sigma / ((1 - sigma) * r2))


def realtime_velocity(v: torch.Tensor, x: torch.Tensor, sigma: float, committed: torch.Tensor,
                      mask: torch.Tensor, vjp: VJP, beta: float) -> torch.Tensor:
    """The guided velocity corrected toward the committed actions.

    v [B,A,D] the (guidance-combined) velocity at x [B,A,D] and noise level sigma; committed
    [A,D] (rows past the overlap are ignored: their weight is 0); mask [A]; vjp(e) = J^T e with
    J = d x1 / d x of the conditional branch. Returns v' [B,A,D]."""
    x1 = x - sigma * v                                                   # [B, A, D] denoised estimate
    err = mask[None, :, None] * (committed[None] - x1)                   # [B, A, D]
    return v - guidance_weight(sigma, beta) * vjp(err)                   # [B, A, D]


METHODS = ("guided", "trained")   # how a committed chunk is continued (module docstring; `trained`: clean_prefix)


def clean_prefix(x: torch.Tensor, sigma: torch.Tensor, committed: torch.Tensor, delay: int):
    """The trained variant's Euler input: the first `delay` actions of x [B, A, D] replaced by the
    committed ones [A, D] (clean), and the per-token times [B, A]: 0 on them, sigma [B] elsewhere.
    The head was trained on exactly this (vam_train/losses.py, `prefix_prob`)."""
    frozen = torch.arange(x.shape[1], device=x.device) < delay          # [A]
    x = torch.where(frozen[None, :, None], committed[None].to(x.dtype), x)  # [B, A, D]
    sig = torch.where(frozen[None], torch.zeros((), dtype=sigma.dtype, device=x.device), sigma[:, None])  # [B, A]
    return x, sig


def check_committed(committed, chunk: int, action_dim: int) -> tuple[np.ndarray, int, str]:
    """The request's committed actions ({"actions": [n, D] real, "delay": d, optionally "method":
    one of METHODS, default guided}) checked: 1 <= n <= chunk, finite, 0 <= d <= n (ValueError
    naming the bad value). Returns (actions float32, d, method)."""
    keys = set(committed) if isinstance(committed, dict) else None
    if keys is None or not {"actions", "delay"} <= keys <= {"actions", "delay", "method"}:
        raise ValueError(f"committed must be a dict with 'actions', 'delay' and optionally 'method', got "
                         f"{sorted(committed) if isinstance(committed, dict) else type(committed).__name__}")
    method = committed.get("method", "guided")
    if method not in METHODS:
        raise ValueError(f"committed method must be one of {METHODS}, got {method!r}")
    a = np.asarray(committed["actions"])
    if a.ndim != 2 or not 1 <= a.shape[0] <= chunk or a.shape[1] != action_dim or a.dtype.kind not in "fiu":
        raise ValueError(f"committed actions must be real [n, {action_dim}] with 1 <= n <= {chunk}, "
                         f"got {a.dtype} {list(a.shape)}")
    bad = np.flatnonzero(~np.isfinite(a).all(1))
    if bad.size:
        raise ValueError(f"committed actions are not finite at rows {bad.tolist()}")
    d = committed["delay"]
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d <= a.shape[0]:
        raise ValueError(f"committed delay must be an integer in [0, {a.shape[0]}] (the committed actions), got {d!r}")
    return a.astype(np.float32), int(d), method
