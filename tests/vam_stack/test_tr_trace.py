"""TR history and phase logic: labels, hysteresis inference, validation, bounds."""
from __future__ import annotations

import numpy as np
import pytest

from vam_stack.tr_trace import TelemetryError, TraceConfig, TRTrace, validate_telemetry
from vam_stack.config import ConfigError, from_dict

pytestmark = pytest.mark.unit


def tel(step, tr, tr0=1.0, **kw):
    s = float(np.clip(tr / tr0 - 1, 0, 2)) if tr0 > 0 else 0.0
    d = {"step": step, "tr": tr, "tr_steps": [tr] * 10, "tr0": tr0, "s": s,
         "w_lang": 0.1 * s, "w_plan": 0.3 * s,
         "branches_computed": ["cond", "null_text", "plan"] if s > 0 else ["cond"],
         "latency_ms": 10.0}
    d.update(kw)
    return d


def run(trace, trs, tr0=1.0):
    return [trace.update(tel(10 * i, tr, tr0)).phase for i, tr in enumerate(trs)]


def test_inferred_phase_follows_tr_with_hysteresis():
    # enter at TR/TR_0 >= 1.10, leave at <= 1.02; in between the phase is held.
    trs = [1.00, 1.05, 1.12, 1.08, 1.03, 1.02, 1.00, 1.09, 1.10, 0.50]
    want = ["manipulation", "manipulation", "planning", "planning", "planning",
            "manipulation", "manipulation", "manipulation", "planning", "manipulation"]
    trace = TRTrace(TraceConfig(enter_planning_ratio=1.10, exit_planning_ratio=1.02))
    assert run(trace, trs) == want
    assert all(r.phase_source == "inferred" for r in trace.replans)


def test_hysteresis_differs_from_a_single_threshold():
    trs = [1.0, 1.12, 1.05, 1.12, 1.05]  # oscillates around 1.06
    banded = TRTrace(TraceConfig(enter_planning_ratio=1.10, exit_planning_ratio=1.02))
    narrow = TRTrace(TraceConfig(enter_planning_ratio=1.07, exit_planning_ratio=1.06))
    assert run(banded, trs) == ["manipulation"] + ["planning"] * 4
    assert run(narrow, trs) == ["manipulation", "planning", "manipulation", "planning",
                                "manipulation"]


def test_ratio_uses_the_reported_baseline():
    trace = TRTrace()
    assert run(trace, [2.0, 2.1, 2.4], tr0=2.0) == ["manipulation", "manipulation", "planning"]


def test_min_dwell_delays_switches():
    trace = TRTrace(TraceConfig(min_dwell_replans=3))
    phases = run(trace, [1.0, 1.2, 1.2, 1.2, 0.9, 0.9, 0.9, 0.9])
    assert phases == ["manipulation", "manipulation", "planning", "planning", "planning",
                      "manipulation", "manipulation", "manipulation"]


def test_zero_baseline_holds_the_phase():
    trace = TRTrace(TraceConfig(initial_phase="planning"))
    assert run(trace, [0.0, 0.5, 0.0], tr0=0.0) == ["planning"] * 3


@pytest.mark.parametrize("unset", [None, float("nan")])
def test_missing_baseline_falls_back_to_the_first_tr_of_the_episode(unset):
    trace = TRTrace()
    for i, tr in enumerate([2.0, 2.1, 2.5, 2.0]):  # flat/none schedules report no TR_0
        trace.update({**tel(10 * i, tr), "tr0": unset, "s": 1.0})
    assert [r.tr0 for r in trace.replans] == [2.0] * 4
    assert {r.tr0_source for r in trace.replans} == {"monitor"}
    assert [r.phase for r in trace.replans] == ["manipulation", "manipulation", "planning",
                                                "manipulation"]
    trace.update(tel(0, 3.0, tr0=3.0))  # new episode with a reported baseline
    assert trace.replans[-1].tr0_source == "policy" and trace.replans[-1].tr0 == 3.0


def test_labels_override_inference_and_agreement_is_reported():
    trace = TRTrace()
    for k in range(0, 20):
        trace.label_step(k, "planning" if k < 10 else "manipulation")
    trace.update(tel(0, 1.0))  # inferred manipulation, labelled planning
    trace.update(tel(5, 1.3))  # agrees: planning
    trace.update(tel(10, 0.8))  # agrees: manipulation
    trace.update(tel(25, 0.8))  # after the last label: takes the latest label before it
    assert [r.phase for r in trace.replans] == ["planning", "planning", "manipulation",
                                                "manipulation"]
    assert [r.inferred_phase for r in trace.replans] == ["manipulation", "planning",
                                                         "manipulation", "manipulation"]
    assert all(r.phase_source == "label" for r in trace.replans)
    sm = trace.summary()
    assert sm["inferred_agreement"] == pytest.approx(3 / 4)
    assert sm["tr_mean_planning"] == pytest.approx(1.15)
    assert sm["tr_mean_manipulation"] == pytest.approx(0.8)


def test_phase_label_argument_labels_the_replan_step():
    trace = TRTrace()
    assert trace.update(tel(0, 1.0), phase_label="planning").phase == "planning"
    assert trace.update(tel(10, 1.0)).phase == "planning"  # latest label before step 10
    assert trace.update(tel(20, 1.0), phase_label="manipulation").phase == "manipulation"


def test_phase_spans_from_labels_and_from_replans():
    trace = TRTrace()
    run(trace, [1.0, 1.2, 1.2, 0.9])  # replans at steps 0, 10, 20, 30
    assert trace.phase_spans() == [(0, 10, "manipulation"), (10, 30, "planning"),
                                   (30, 40, "manipulation")]
    assert trace.phase_spans(end_step=55)[-1] == (30, 55, "manipulation")
    labelled = TRTrace()
    for k in range(6):
        labelled.label_step(k, "planning" if k in (2, 3) else "manipulation")
    assert labelled.phase_spans() == [(0, 2, "manipulation"), (2, 4, "planning"),
                                      (4, 6, "manipulation")]
    assert TRTrace().phase_spans() == []


def test_step_rewind_starts_a_new_episode_or_is_rejected():
    trace = TRTrace()
    run(trace, [1.0, 1.3, 1.3])
    trace.update(tel(0, 2.0, tr0=2.0))
    assert len(trace.replans) == 1 and trace.resets == 1 and trace.phase == "manipulation"
    strict = TRTrace(TraceConfig(new_episode_on_step_rewind=False))
    run(strict, [1.0, 1.3])
    with pytest.raises(TelemetryError, match="step 10 is not after the last replan's step 10"):
        strict.update(tel(10, 1.0))
    strict.reset()
    strict.update(tel(0, 1.0))


def test_history_is_bounded_and_attention_kept_for_the_latest_replan():
    trace = TRTrace(TraceConfig(max_replans=5, max_step_labels=3))
    for i in range(12):
        trace.label_step(i, "planning")
        trace.update(tel(i, 1.0, attention=np.full((2, 4), float(i))))
    assert [r.step for r in trace.replans] == [7, 8, 9, 10, 11]
    assert list(trace.step_labels) == [9, 10, 11]
    assert trace.latest_attention[0, 0] == 11.0


@pytest.mark.parametrize("change, match", [
    ({"tr": float("nan")}, "'tr'.*finite"),
    ({"tr": "1.0"}, "'tr'.*number"),
    ({"tr0": "1.0"}, "'tr0'.*number"),
    ({"tr0": float("inf")}, "'tr0'.*finite"),
    ({"latency_ms": -1.0}, "'latency_ms'.*>= 0"),
    ({"step": -1}, "'step'"),
    ({"step": True}, "'step'"),
    ({"step": 1.5}, "'step'"),
    ({"branches_computed": ["cond", "guess"]}, "branches_computed"),
    ({"branches_computed": ["cond", "cond"]}, "branches_computed"),
    ({"branches_computed": "cond"}, "branches_computed"),
    ({"tr_steps": [1.0, float("inf")]}, "tr_steps"),
    ({"tr_steps": [[1.0]]}, "tr_steps"),
    ({"attention": [[1.0]]}, "attention"),
    ({"attention": np.full((2, 3), -1.0)}, "attention"),
])
def test_bad_telemetry_is_rejected(change, match):
    with pytest.raises(TelemetryError, match=match):
        validate_telemetry({**tel(0, 1.0), **change})


def test_missing_fields_and_bad_labels_are_rejected():
    d = tel(0, 1.0)
    del d["tr0"], d["w_plan"]
    with pytest.raises(TelemetryError, match="lacks \\['tr0', 'w_plan'\\]"):
        TRTrace().update(d)
    with pytest.raises(TelemetryError, match="mapping"):
        TRTrace().update([1, 2])
    trace = TRTrace()
    with pytest.raises(TelemetryError, match="'grasping'"):
        trace.update(tel(0, 1.0), phase_label="grasping")
    with pytest.raises(TelemetryError, match="'grasping'"):
        trace.label_step(3, "grasping")
    assert not trace.replans  # nothing was added by the rejected calls


def test_extra_keys_are_ignored_and_numpy_scalars_accepted():
    out = validate_telemetry({**tel(np.int64(4), np.float32(1.5)), "timing_ms": {"head": 3.0}})
    assert out["step"] == 4 and out["tr"] == 1.5 and "timing_ms" not in out


def test_config_is_validated():
    with pytest.raises(ConfigError, match="hysteresis, got 1.0"):
        TraceConfig(enter_planning_ratio=1.0, exit_planning_ratio=1.02)
    with pytest.raises(ConfigError, match="'reaching'"):
        TraceConfig(initial_phase="reaching")
    with pytest.raises(ConfigError, match="did you mean 'min_dwell_replans'"):
        from_dict(TraceConfig, {"min_dwell_replan": 2})


def test_summary_counts_guided_replans_and_latency():
    trace = TRTrace()
    assert trace.summary() == {"replans": 0}
    run(trace, [1.0, 1.2, 1.0, 1.4])
    sm = trace.summary()
    assert sm["replans"] == 4 and sm["guided_replans"] == 2
    assert sm["tr_max"] == 1.4 and sm["latency_ms_mean"] == 10.0
    assert sm["planning_fraction"] == pytest.approx(0.5)  # 1.0 <= exit ratio: back to manipulation
