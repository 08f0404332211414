"""One replan's working state for `VamPolicy.infer`: the guidance branches (each a row of
`VideoActionModel.embed_prefix` / `denoise_step`), TR read from the conditional branch, the
guided velocity of every Euler step (real-time chunking's correction on top when a committed
chunk came with the request), and the telemetry. See vam_model/policy.py for the steps."""
from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import torch

from . import device as devices
from . import realtime_chunking as rtc
from .guidance import combine_velocities, guidance_label
from .networks.head_io import HeadCache, HeadOutput

BRANCHES = ("cond", "null_text", "plan")


class _Timer:
    """Wall time per stage; with `sync` (a callable waiting for the device) the stage's device work too."""

    def __init__(self, sync=None):
        self.ms: dict[str, float] = {}
        self.sync = sync

    @contextmanager
    def __call__(self, name: str):
        if self.sync:
            self.sync()
        t0 = time.perf_counter()
        yield
        if self.sync:
            self.sync()
        self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1e3


class Replan:
    """One replan's working state: each branch's head prefix cache (a branch runs its video pass
    the first time it is needed), the TR of every Euler step (on the device until the end), the
    guidance weights in force, the attention map, and the time spent per stage."""

    def __init__(self, policy, noise: dict):
        self.policy, self.noise = policy, noise
        dev = policy.device
        self.timer = _Timer(torch.cuda.synchronize if policy.cfg.sync_timing and dev.type == "cuda" else None)
        self.anchor: torch.Tensor | None = None       # [1, 16, 1, h, w] clean latent of the current frame
        self.state: torch.Tensor | None = None        # [1, P] normalised proprio
        self.caches: dict[str, HeadCache] = {}        # branch -> its prefix cache (batch 1)
        self._joint: dict[tuple, HeadCache] = {}      # branches -> their caches stacked for one batched call
        self.sigma_v: float | None = None             # the cond branch's feature time
        self.tr_dev: list[torch.Tensor] = []          # per Euler step: the cond branch's TR [1], on the device
        self.s_steps: list[float] = []
        self.attention: torch.Tensor | None = None    # [1, A, Tv] at step 0, on the device
        self.fixed = policy.guidance.fixed_weights()  # (s, w_lang, w_plan) when TR cannot change them, else None
        self.rtc = None                               # (committed [A, D] normalised, mask [A] (guided only), delay,
                                                      #  method) or None
        self._rtc_graph = None                        # (x with grad, cond velocity [A, D]) of the step in progress
        self.s, self.w_lang, self.w_plan = self.fixed or (0.0, 0.0, 0.0)

    # ---- branches ---------------------------------------------------------------------------
    def needed_branches(self) -> tuple[str, ...]:
        """The branches the weights in force need: cond, plus each guidance branch whose weight is > 0."""
        return ("cond",) + (("null_text",) if self.w_lang > 0 else ()) + (("plan",) if self.w_plan > 0 else ())

    def prepare(self, names: tuple[str, ...]) -> None:
        """Video passes and head prefixes (`VideoActionModel.embed_prefix`) of the branches in
        `names` not computed yet: cond and null-text share one batch when batching (same anchor,
        noise and length; only the text differs), the plan branch (T' frames) runs alone."""
        p, m = self.policy, self.policy.model
        new = tuple(n for n in names if n not in self.caches)
        shared = tuple(n for n in new if n != "plan")
        groups = ([shared] if p.cfg.batch_branches and shared else [(n,) for n in shared])
        groups += [("plan",)] if "plan" in new else []
        for group in groups:
            k, label = len(group), "+".join(group)
            text = torch.cat([p._null_text if n == "null_text" else p._text for n in group])  # [k, L, text_dim]
            vnoise = self.noise["plan" if group == ("plan",) else "video"]                   # [1, 16, T_roll, h, w]
            with p.autocast():
                cache, self.sigma_v = m.embed_prefix(
                    self.anchor.expand(k, -1, -1, -1, -1), text, self.state.expand(k, -1),     # [k, 16, 1, h, w], ..
                    vnoise.expand(k, -1, -1, -1, -1), p.cfg.feature_index, p.backend,
                    timer=lambda stage: self.timer(f"{stage}_{label}"))                       # [layers, k, 1, Lp, hd]
            self._joint[group] = cache
            for i, n in enumerate(group):
                p.forward_calls[n] += 1
                self.caches[n] = cache.rows(i)

    def _step(self, names: tuple[str, ...], x: torch.Tensor, sigma: torch.Tensor) -> dict[str, HeadOutput]:
        """One Euler evaluation of each branch in `names`: batched in one head call, or one call each."""
        p = self.policy
        self.prepare(names)
        chunks = [names] if p.cfg.batch_branches else [(n,) for n in names]
        out = {}
        with self.timer("euler"), p.autocast():
            for chunk in chunks:
                k = len(chunk)
                cache = self._joint.get(chunk)
                if cache is None:
                    cache = self._joint[chunk] = HeadCache.cat([self.caches[n] for n in chunk])
                sig = sigma.expand(k, *sigma.shape[1:])                                  # [k] or per token [k, A]
                if self.rtc is not None and self.rtc[3] == "guided" and "cond" in chunk:  # RTC's VJP reuses this forward
                    with torch.enable_grad():
                        xr = x.detach().float().requires_grad_(True)                          # [1, A, D]
                        res = p.model.denoise_step(cache, xr.expand(k, -1, -1), sig)          # torch head
                    self._rtc_graph = (xr, res.velocity[chunk.index("cond")])                 # [1, A, D], [A, D]
                    res = res.detached()
                else:   # per-token times (trained RTC) run the torch head; one time per row, the backend
                    res = p.model.denoise_step(cache, x.expand(k, -1, -1), sig, p.backend)  # [k, A, D], ..
                for i, n in enumerate(chunk):
                    out[n] = res.row(i)
        return out

    # ---- Euler velocity -----------------------------------------------------------------------
    def velocity(self, x: torch.Tensor, sigma: torch.Tensor, step: int) -> torch.Tensor:
        """The guided velocity at Euler step `step` ([1, A_H, D]). Under tr_adaptive, TR is read
        from the cond branch at step 0 (every step with `tr_every_step`) and sets the weights
        before the other branches run; a branch runs only while its weight is > 0."""
        p = self.policy
        trained = self.rtc is not None and self.rtc[3] == "trained"
        x_in, sigma_in = x, sigma
        if trained:                                                          # the committed prefix, clean at sigma 0
            x, sigma = rtc.clean_prefix(x, sigma, self.rtc[0], self.rtc[2])  # [1, A, D], [1, A]
        if self.fixed is None and (step == 0 or p.cfg.guidance.tr_every_step):
            rows = self._step(("cond",), x, sigma)
            tr_t = rows["cond"].tr()                                         # [1]
            with self.timer("tr"):
                tr = devices.read_scalar(tr_t)                               # the host read that decides the branches
            with self.timer("guidance"):
                self.s, self.w_lang, self.w_plan = p.guidance.update(tr)
            extra = self.needed_branches()[1:]
            if extra:
                rows.update(self._step(extra, x, sigma))
        else:
            rows = self._step(self.needed_branches(), x, sigma)
            tr_t = rows["cond"].tr()                                         # [1]
        cond = rows["cond"]
        self.tr_dev.append(tr_t)                                             # stays on the device until the end
        if step == 0 and p.cfg.return_attention:
            self.attention = cond.attention                                  # [1, A, Tv]
        self.s_steps.append(self.s)
        v_null = rows["null_text"].velocity if "null_text" in rows else None
        v_plan = rows["plan"].velocity if "plan" in rows else None
        v = combine_velocities(cond.velocity.float(), v_null, v_plan, self.w_lang, self.w_plan)  # [1, A_H, D]
        if trained:   # the integrator's prefix rows run the straight path from their noise to the committed actions
            to_y = (x_in - self.rtc[0][None]) / sigma_in.view(-1, 1, 1)      # [1, A_H, D] (sigma > 0 at every Euler step)
            v = torch.where(sigma[..., None] > 0, v, to_y)                   # [1, A_H, D]
        elif self.rtc is not None:                                           # guided: continue the executing chunk
            y, mask, _, _ = self.rtc
            sig = 1.0 - step / p.cfg.euler_steps                             # this step's sigma, no host read
            xr, v_cond = self._rtc_graph                                     # this step's cond forward, with grad

            def vjp(e):                                                      # e [1, A, D] -> J^T e, J = d x1 / d x
                with torch.enable_grad():
                    return torch.autograd.grad(xr - sig * v_cond, xr, grad_outputs=e)[0]

            with self.timer("rtc"):
                v = rtc.realtime_velocity(v, x, sig, y, mask, vjp, p.cfg.rtc_beta)  # [1, A_H, D]
            self._rtc_graph = None
        return v

    # ---- end of the replan ------------------------------------------------------------------
    def finish(self, actions_n: torch.Tensor, t_start: float) -> dict:
        """One copy back to the host (actions, TR per step, attention), then the telemetry."""
        p = self.policy
        with self.timer("tr"):
            tensors = [actions_n[0], torch.cat(self.tr_dev)] + ([self.attention[0]] if self.attention is not None else [])
            host = devices.to_host(*tensors)
        actions_n, tr_steps = host[0], [float(v) for v in host[1]]
        # (a step read mid-replan under tr_adaptive is this same device value: nothing to reconcile)
        if self.fixed is not None:                                           # weights fixed: TR_0 bookkeeping only
            with self.timer("guidance"):
                p.guidance.update(tr_steps[0])
        a_mean, a_std = p.stats["action"]
        actions = (actions_n * a_std + a_mean).astype(np.float32)            # [A_H, D]
        total_ms = (time.perf_counter() - t_start) * 1e3
        return {
            "actions": actions,
            "replan": p.replan_index,
            "tr": tr_steps[0],
            "tr_steps": tr_steps,
            "tr0": p.guidance.tr0 if p.guidance.tr0 is not None else float("nan"),
            "guidance": guidance_label(p.guidance.cfg),   # the schedule, with its TR_0 ablation if any
            "s": self.s_steps[0],
            "s_steps": self.s_steps,
            "w_lang": self.w_lang,
            "w_plan": self.w_plan,
            "sigma_v": self.sigma_v,
            "branches_computed": [b for b in BRANCHES if b in self.caches],
            "rtc_delay": None if self.rtc is None else self.rtc[2],   # frozen actions of a continued chunk
            "rtc_method": None if self.rtc is None else self.rtc[3],
            "timing_ms": {**{k: round(v, 3) for k, v in self.timer.ms.items()}, "total": round(total_ms, 3)},
            "latency_ms": total_ms,
            "attention": host[2] if len(host) > 2 else None,
            "token_grid": list(p.mcfg.head_grid),   # rows x cols of the attention's video tokens per latent frame
            "checkpoint": p.checkpoint,
            "device": str(p.device),
        }
