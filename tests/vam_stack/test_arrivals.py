"""ArrivalStats: latency behind stamps, period, jitter and missed periods of a message stream."""
from __future__ import annotations

import math

import pytest

from vam_stack.arrivals import ArrivalStats
from vam_stack.config import ConfigError

pytestmark = pytest.mark.unit


def test_a_steady_stream_has_its_latency_no_jitter_and_no_misses():
    s = ArrivalStats(rate_hz=30.0)
    for i in range(100):
        s.add(10.0 + i / 30.0 + 0.004, stamp_s=10.0 + i / 30.0)
    out = s.summary("targets_")
    assert out["targets_received"] == 100 and out["targets_missed"] == 0
    assert out["targets_latency_ms_p50"] == pytest.approx(4.0) and out["targets_latency_ms_p99"] == pytest.approx(4.0)
    assert out["targets_period_ms_p50"] == pytest.approx(1000 / 30) and out["targets_jitter_ms_p99"] < 1e-6


def test_gaps_count_the_whole_periods_missed_and_show_in_the_jitter():
    s = ArrivalStats(rate_hz=10.0)
    times = [0.0, 0.1, 0.2, 0.5, 0.6, 0.61]     # a 0.3 s gap misses 2 periods; 0.61 comes 90 ms early
    for t in times:
        s.add(t)
    out = s.summary()
    assert out["missed"] == 2 and out["received"] == 6
    assert out["jitter_ms_p99"] == pytest.approx(200.0, abs=8.0)
    assert math.isnan(out["latency_ms_p50"])          # no stamps given


def test_nothing_yet_is_nan_and_bad_rates_are_refused():
    out = ArrivalStats(rate_hz=30.0).summary()
    assert out["received"] == 0 and math.isnan(out["jitter_ms_p99"])
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="rate_hz"):
            ArrivalStats(rate_hz=bad)
