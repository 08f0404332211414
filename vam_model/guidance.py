"""Guidance schedules and the per-episode TR baseline.

    v = v_cond + w_lang,i (v_cond - v_null_text) + w_plan,i (v_plan - v_cond)

Schedules:
  none         w = 0: only the conditional branch is ever computed;
  flat         w = base weights at every step of every replan;
  tr_adaptive  w = base * s_i with s_i = clip(TR_i / TR_0 - 1, 0, s_max); TR_0 is the TR of
               the first replan of the episode, held until `reset()`.
TR-gated compute: a branch whose weight is 0 contributes nothing, so it is not computed.

The baseline is the paper's by default (`tr_baseline: first`). `running_min` (TR_0 = the
lowest TR read so far this episode, the current reading included) is an ablation of the paper
study, always reported under its own label `tr_adaptive+running_min` (`guidance_label`, which
every replan's telemetry carries), never in place of the paper's schedule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from vam_stack.config import check

from vam_stack.names import GUIDANCE_LABELS, TR_BASELINES, GUIDANCE_SCHEDULES as SCHEDULES


@dataclass(frozen=True)
class GuidanceConfig:
    schedule: str = "tr_adaptive"     # guidance schedule: none | flat (the base weights always) | tr_adaptive (base weights scaled by TR against TR_0)
    w_lang_base: float = 0.1          # null-text (language) guidance base weight (paper canonical 0.1)
    w_plan_base: float = 0.3          # long-horizon plan guidance base weight (paper canonical 0.3)
    s_max: float = 2.0                # upper clip of the adaptive scale
    tr_every_step: bool = False       # re-read TR at every Euler step (default: once per replan, at step 0)
    tr_baseline: str = "first"        # TR_0 of tr_adaptive: first (the paper: the episode's first TR) | running_min
                                      # (ablation: the lowest TR so far, this reading included)

    def __post_init__(self):
        check(self.schedule in SCHEDULES, f"guidance.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        check(self.tr_baseline in TR_BASELINES,
              f"guidance.tr_baseline must be one of {TR_BASELINES}, got {self.tr_baseline!r}")
        for name in ("w_lang_base", "w_plan_base", "s_max"):
            v = getattr(self, name)
            check(math.isfinite(v) and v >= 0, f"guidance.{name} must be finite and >= 0, got {v!r}")


def guidance_label(cfg: GuidanceConfig) -> str:
    """The name results carry: the schedule, plus '+<baseline>' for an ablated TR_0 under tr_adaptive."""
    if cfg.schedule == "tr_adaptive" and cfg.tr_baseline != "first":
        return f"{cfg.schedule}+{cfg.tr_baseline}"
    return cfg.schedule


def parse_guidance_label(label: str) -> tuple[str, str]:
    """'tr_adaptive+running_min' -> ('tr_adaptive', 'running_min'); 'flat' -> ('flat', 'first')."""
    schedule, _, baseline = str(label).partition("+")
    if str(label) not in GUIDANCE_LABELS:
        raise ValueError(f"unknown guidance {label!r}; expected one of {list(GUIDANCE_LABELS)}")
    return schedule, baseline or "first"


def combine_velocities(v_cond, v_null=None, v_plan=None, w_lang: float = 0.0, w_plan: float = 0.0):
    """The guided velocity v = v_cond + w_lang (v_cond - v_null) + w_plan (v_plan - v_cond).

    The language term pushes away from the null-text prediction, the plan term pulls toward the
    prediction conditioned on the longer imagined rollout. A branch whose weight is 0 is not
    needed (None allowed) and contributes nothing: zero weights return v_cond itself."""
    v = v_cond
    if w_lang > 0:
        v = v + w_lang * (v_cond - v_null)
    if w_plan > 0:
        v = v + w_plan * (v_plan - v_cond)
    return v


def adaptive_scale(tr: float, tr0: float, s_max: float) -> float:
    """s = clip(TR / TR_0 - 1, 0, s_max); a non-finite or non-positive TR_0 gives 0."""
    if not (math.isfinite(tr) and math.isfinite(tr0)) or tr0 <= 0:
        return 0.0
    return min(max(tr / tr0 - 1.0, 0.0), s_max)


class GuidanceSchedule:
    """Holds TR_0 for the episode and turns TR readings into (s, w_lang, w_plan)."""

    def __init__(self, cfg: GuidanceConfig):
        self.cfg = cfg
        self.tr0: float | None = None

    def reset(self) -> None:
        self.tr0 = None

    def fixed_weights(self) -> tuple[float, float, float] | None:
        """(s, w_lang, w_plan) when no TR reading can change them (none, flat), else None."""
        c = self.cfg
        if c.schedule == "none":
            return 0.0, 0.0, 0.0
        if c.schedule == "flat":
            return 1.0, c.w_lang_base, c.w_plan_base
        return None

    def update(self, tr: float) -> tuple[float, float, float]:
        """Take one TR reading: (s, w_lang, w_plan) for it; the first reading of an episode sets TR_0."""
        c = self.cfg
        if self.tr0 is None:              # the baseline is tracked under every schedule (for monitoring)
            self.tr0 = float(tr)
        elif c.tr_baseline == "running_min" and math.isfinite(tr):
            self.tr0 = float(tr) if not math.isfinite(self.tr0) else min(self.tr0, float(tr))
        if c.schedule == "none":
            return 0.0, 0.0, 0.0
        if c.schedule == "flat":
            return 1.0, c.w_lang_base, c.w_plan_base
        s = adaptive_scale(float(tr), self.tr0, c.s_max)
        return s, c.w_lang_base * s, c.w_plan_base * s
