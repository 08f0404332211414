"""TR history of an episode and the planning/manipulation phase (plain Python, no rclpy; the TR
monitor node and the simulators' episode runner, vam_sim/episode.py, keep one per episode).

The policy emits one telemetry dict per replan (`step`, `tr`, `tr_steps`, `tr0`, `s`,
`w_lang`, `w_plan`, `branches_computed`, `latency_ms`, optionally `attention`). `TRTrace`
validates and keeps them (bounded), and tracks the phase of every replan:

- **Labels first.** When the caller supplies phase labels (the scripted expert labels every
  env step "planning" or "manipulation"), a replan takes the label of its own step (or the
  latest labelled step before it).
- **Otherwise inferred from TR, with hysteresis.** With r = TR_i / TR_0, the inferred phase
  switches to "planning" when r >= `enter_planning_ratio` and back to "manipulation" when
  r <= `exit_planning_ratio` (enter > exit, so TR hovering near one threshold does not make
  the phase flicker); between the two the phase is held. A switch also comes no sooner than
  `min_dwell_replans` replans after the previous one (or the episode start). The episode
  starts in `initial_phase`: the first replan defines TR_0 (r = 1 exactly), so it carries no
  evidence of planning, and s = 0 there — guidance is off, as in manipulation. TR_0 <= 0
  (zero attention mass guarded upstream) gives no ratio: the phase is held.

TR_0 may be missing (None or NaN) from a policy that does not report one (VamPolicy tracks it
under every schedule, so its telemetry always has it). The monitor then uses its own: the TR of
the episode's first replan, which is how the policy defines TR_0. `ReplanRecord.tr0_source` says which
one a replan used.

The inferred phase is tracked even when labels exist, so `summary()` can report how well TR
alone recovers the labels — the paper's claim that planning phases have high TR.
"""
from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from vam_stack.config import check

PHASES = ("planning", "manipulation")
BRANCHES = ("cond", "null_text", "plan")
_REQUIRED = ("step", "tr", "tr0", "s", "w_lang", "w_plan", "branches_computed", "latency_ms")


class TelemetryError(ValueError):
    """A telemetry dict or phase label is malformed; the message names the field and value."""


@dataclass(frozen=True)
class TraceConfig:
    """History bounds and phase-inference thresholds of the TR monitor."""

    max_replans: int = 4096  # replans kept; the longest episode (520 x 1.5 steps / 10) needs 78
    max_step_labels: int = 20000  # per-step phase labels kept (a live node runs for hours)
    enter_planning_ratio: float = 1.10  # TR/TR_0 at or above which inference says "planning"
    exit_planning_ratio: float = 1.02  # TR/TR_0 at or below which it says "manipulation" again
    min_dwell_replans: int = 1  # an inferred switch comes no sooner than this many replans
    #   after the previous switch (or the episode start); 1 = switch as soon as TR says so
    initial_phase: str = "manipulation"  # phase before any evidence (first replan: r = 1, s = 0)
    new_episode_on_step_rewind: bool = True  # step <= last step starts a new episode (the live
    #   node has no other episode signal); False makes a rewind an error

    def __post_init__(self) -> None:
        check(self.max_replans >= 2, f"max_replans must be >= 2, got {self.max_replans!r}")
        check(self.max_step_labels >= 1,
              f"max_step_labels must be >= 1, got {self.max_step_labels!r}")
        check(math.isfinite(self.exit_planning_ratio) and self.exit_planning_ratio > 0,
              f"exit_planning_ratio must be > 0, got {self.exit_planning_ratio!r}")
        check(math.isfinite(self.enter_planning_ratio)
              and self.enter_planning_ratio > self.exit_planning_ratio,
              f"enter_planning_ratio must be > exit_planning_ratio "
              f"({self.exit_planning_ratio!r}) for hysteresis, got {self.enter_planning_ratio!r}")
        check(self.min_dwell_replans >= 1,
              f"min_dwell_replans must be >= 1, got {self.min_dwell_replans!r}")
        check(self.initial_phase in PHASES,
              f"initial_phase must be one of {PHASES}, got {self.initial_phase!r}")


@dataclass(frozen=True)
class ReplanRecord:
    """One replan as the TR monitor records it: validated telemetry with its phase (the policy's
    working state during a replan is `vam_model.replan.Replan`)."""

    step: int  # env step index of the replan
    tr: float  # TR_i
    tr_steps: tuple[float, ...]  # TR at each Euler step
    tr0: float  # episode baseline TR_0 in use (the policy's, else the monitor's own)
    s: float  # guidance scale s_i
    w_lang: float
    w_plan: float
    branches_computed: tuple[str, ...]
    latency_ms: float
    phase: str  # phase used for display: label when available, else inferred
    inferred_phase: str  # phase from TR with hysteresis (always computed)
    phase_source: str  # "label" | "inferred"
    tr0_source: str = "policy"  # "policy" | "monitor" (first TR of the episode)


def _number(d: Mapping[str, Any], key: str, minimum: float | None = 0.0) -> float:
    v = d[key]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TelemetryError(f"telemetry[{key!r}] must be a number, got {v!r}")
    f = float(v)
    if not math.isfinite(f):
        raise TelemetryError(f"telemetry[{key!r}] must be finite, got {v!r}")
    if minimum is not None and f < minimum:
        raise TelemetryError(f"telemetry[{key!r}] must be >= {minimum}, got {v!r}")
    return f


def check_phase(label: Any) -> str:
    if label not in PHASES:
        raise TelemetryError(f"phase label must be one of {PHASES}, got {label!r}")
    return label


def validate_telemetry(d: Any) -> dict[str, Any]:
    """Checked, normalised copy of one replan's telemetry (extra keys are ignored)."""
    if not isinstance(d, Mapping):
        raise TelemetryError(f"telemetry must be a mapping, got {type(d).__name__}")
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise TelemetryError(f"telemetry lacks {missing}; has {sorted(map(str, d))}")
    step = d["step"]
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)) or step < 0:
        raise TelemetryError(f"telemetry['step'] must be an integer >= 0, got {step!r}")
    out: dict[str, Any] = {"step": int(step)}
    for key in ("tr", "s", "w_lang", "w_plan", "latency_ms"):
        out[key] = _number(d, key)
    tr0 = d["tr0"]
    unset = tr0 is None or (isinstance(tr0, (float, np.floating)) and math.isnan(tr0))
    out["tr0"] = None if unset else _number(d, "tr0")  # None: the schedule set no baseline
    tr_steps = d.get("tr_steps", ())
    if tr_steps is None:
        tr_steps = ()
    try:
        arr = np.asarray(tr_steps, dtype=np.float64)
    except (TypeError, ValueError):
        raise TelemetryError(f"telemetry['tr_steps'] must be numbers, got {tr_steps!r}") from None
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise TelemetryError(
            f"telemetry['tr_steps'] must be a flat list of finite values >= 0, got {tr_steps!r}")
    out["tr_steps"] = tuple(float(x) for x in arr)
    br = d["branches_computed"]
    if isinstance(br, str) or not isinstance(br, Sequence):
        raise TelemetryError(f"telemetry['branches_computed'] must be a list, got {br!r}")
    bad = [b for b in br if b not in BRANCHES]
    if bad or len(set(br)) != len(br):
        raise TelemetryError(
            f"telemetry['branches_computed'] must be distinct names from {BRANCHES}, got {br!r}")
    out["branches_computed"] = tuple(br)
    grid = d.get("token_grid")
    if grid is not None:
        if (isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence) or len(grid) != 2
                or any(isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g <= 0 for g in grid)):
            raise TelemetryError(f"telemetry['token_grid'] must be two positive integers (rows, cols), got {grid!r}")
        out["token_grid"] = (int(grid[0]), int(grid[1]))
    att = d.get("attention")
    if att is not None:
        if not isinstance(att, np.ndarray) or att.ndim != 2 or att.size == 0:
            raise TelemetryError("telemetry['attention'] must be a non-empty 2-d array "
                                 f"[A_H, n_video_tokens], got {getattr(att, 'shape', att)!r}")
        if not np.all(np.isfinite(att)) or np.any(att < 0):
            raise TelemetryError("telemetry['attention'] must be finite and >= 0")
        out["attention"] = att
    return out


class TRTrace:
    """Bounded TR history of one episode plus phase tracking; `reset()` starts a new one."""

    def __init__(self, cfg: TraceConfig | None = None) -> None:
        self.cfg = cfg or TraceConfig()
        self.replans: deque[ReplanRecord] = deque(maxlen=self.cfg.max_replans)
        self.step_labels: OrderedDict[int, str] = OrderedDict()  # env step -> label
        self.latest_attention: np.ndarray | None = None  # [A_H, n_video_tokens] of last replan
        self.token_grid: tuple[int, int] | None = None  # (rows, cols) of video tokens per latent frame, from
        #   the policy's telemetry (its preset's head grid); kept across episodes: the policy is the same
        self.resets = 0  # reset() calls, explicit or by a step rewind
        self._inferred = self.cfg.initial_phase
        self._dwell = 0
        self._own_tr0: float | None = None  # first TR of the episode (used if none reported)

    def reset(self) -> None:
        """Forget the episode (history, labels, attention, phase state)."""
        self.replans.clear()
        self.step_labels.clear()
        self.latest_attention = None
        self._inferred = self.cfg.initial_phase
        self._dwell = 0
        self._own_tr0 = None
        self.resets += 1

    @property
    def last_step(self) -> int | None:
        return self.replans[-1].step if self.replans else None

    @property
    def phase(self) -> str:
        """Phase of the latest replan (initial phase before any)."""
        return self.replans[-1].phase if self.replans else self.cfg.initial_phase

    def label_step(self, step: int, phase: str) -> None:
        """Record the externally known phase of env step `step` (e.g. the expert's label)."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise TelemetryError(f"labelled step must be an integer >= 0, got {step!r}")
        self.step_labels[int(step)] = check_phase(phase)
        self.step_labels.move_to_end(int(step))
        while len(self.step_labels) > self.cfg.max_step_labels:
            self.step_labels.popitem(last=False)

    def label_at(self, step: int) -> str | None:
        """Label of `step`, else of the latest labelled step before it, else None."""
        if step in self.step_labels:
            return self.step_labels[step]
        before = [s for s in self.step_labels if s <= step]
        return self.step_labels[max(before)] if before else None

    def _infer(self, tr: float, tr0: float) -> str:
        self._dwell += 1
        if tr0 <= 0:
            return self._inferred
        r = tr / tr0
        target = self._inferred
        if self._inferred == "manipulation" and r >= self.cfg.enter_planning_ratio:
            target = "planning"
        elif self._inferred == "planning" and r <= self.cfg.exit_planning_ratio:
            target = "manipulation"
        if target != self._inferred and self._dwell >= self.cfg.min_dwell_replans:
            self._inferred = target
            self._dwell = 0
        return self._inferred

    def update(self, telemetry: Mapping[str, Any], phase_label: str | None = None) -> ReplanRecord:
        """Add one replan's telemetry; `phase_label` (optional) is the known phase at its step."""
        t = validate_telemetry(telemetry)
        if phase_label is not None:
            check_phase(phase_label)
        if self.replans and t["step"] <= self.replans[-1].step:
            if not self.cfg.new_episode_on_step_rewind:
                raise TelemetryError(
                    f"telemetry step {t['step']} is not after the last replan's step "
                    f"{self.replans[-1].step}; call reset() when an episode starts")
            self.reset()
        if phase_label is not None:
            self.label_step(t["step"], phase_label)
        if self._own_tr0 is None:
            self._own_tr0 = t["tr"]
        tr0 = t["tr0"] if t["tr0"] is not None else self._own_tr0
        inferred = self._infer(t["tr"], tr0)
        label = self.label_at(t["step"])
        rp = ReplanRecord(step=t["step"], tr=t["tr"], tr_steps=t["tr_steps"], tr0=tr0, s=t["s"],
                    w_lang=t["w_lang"], w_plan=t["w_plan"],
                    branches_computed=t["branches_computed"], latency_ms=t["latency_ms"],
                    phase=label or inferred, inferred_phase=inferred,
                    phase_source="label" if label else "inferred",
                    tr0_source="policy" if t["tr0"] is not None else "monitor")
        self.replans.append(rp)
        if "attention" in t:
            self.latest_attention = t["attention"]
        if "token_grid" in t:
            self.token_grid = t["token_grid"]
        return rp

    def arrays(self) -> dict[str, np.ndarray]:
        """Columns of the history as arrays (for plotting and statistics)."""
        rp = list(self.replans)
        col = lambda name: np.array([getattr(r, name) for r in rp], dtype=np.float64)  # noqa: E731
        out = {k: col(k) for k in ("step", "tr", "tr0", "s", "w_lang", "w_plan", "latency_ms")}
        out["tr_min"] = np.array([min(r.tr_steps) if r.tr_steps else r.tr for r in rp])
        out["tr_max"] = np.array([max(r.tr_steps) if r.tr_steps else r.tr for r in rp])
        out["guided"] = np.array([len(r.branches_computed) > 1 for r in rp], dtype=bool)
        out["planning"] = np.array([r.phase == "planning" for r in rp], dtype=bool)
        return out

    def phase_spans(self, end_step: int | None = None) -> list[tuple[int, int, str]]:
        """Contiguous [start, end) env-step spans of each phase, for shading a plot.

        Per-step labels are used where they exist; otherwise each replan's phase lasts until
        the next replan (the last one for one typical replan interval, or to `end_step`).
        """
        if self.step_labels:
            steps = sorted(self.step_labels)
            marks = [(s, self.step_labels[s]) for s in steps]
            last = steps[-1] + 1
        elif self.replans:
            marks = [(r.step, r.phase) for r in self.replans]
            steps = [r.step for r in self.replans]
            gap = int(np.median(np.diff(steps))) if len(steps) > 1 else 1
            last = steps[-1] + max(gap, 1)
        else:
            return []
        if end_step is not None:
            last = max(last, int(end_step))
        spans: list[tuple[int, int, str]] = []
        for i, (s, ph) in enumerate(marks):
            nxt = marks[i + 1][0] if i + 1 < len(marks) else last
            if spans and spans[-1][2] == ph and spans[-1][1] == s:
                spans[-1] = (spans[-1][0], nxt, ph)
            else:
                spans.append((s, nxt, ph))
        return spans

    def summary(self) -> dict[str, Any]:
        """Episode statistics: TR, guidance use, latency, phases (JSON-friendly)."""
        if not self.replans:
            return {"replans": 0}
        a = self.arrays()
        out: dict[str, Any] = {
            "replans": len(self.replans),
            "tr0": float(a["tr0"][-1]),
            "tr_mean": float(a["tr"].mean()), "tr_min": float(a["tr"].min()),
            "tr_max": float(a["tr"].max()),
            "s_mean": float(a["s"].mean()),
            "guided_replans": int(a["guided"].sum()),
            "latency_ms_mean": float(a["latency_ms"].mean()),
            "latency_ms_p95": float(np.percentile(a["latency_ms"], 95)),
            "latency_ms_max": float(a["latency_ms"].max()),
            "planning_fraction": float(a["planning"].mean()),
        }
        for ph in PHASES:
            sel = np.array([r.phase == ph for r in self.replans])
            out[f"tr_mean_{ph}"] = float(a["tr"][sel].mean()) if sel.any() else None
        labelled = [r for r in self.replans if r.phase_source == "label"]
        if labelled:
            agree = sum(r.phase == r.inferred_phase for r in labelled)
            out["inferred_agreement"] = agree / len(labelled)
        return out
