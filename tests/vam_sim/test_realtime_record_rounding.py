"""summary.json's realtime replan latencies are rounded to 0.1 ms (issue 61 row 17): `sim --robot
yam-mujoco` printed "replan p50/p95 300.16281050001226/889.8777127500637 ms" from them."""
from __future__ import annotations

import pytest

from vam_sim.episode import PolicyEpisode

pytestmark = pytest.mark.unit


def test_replan_latencies_are_rounded():
    log = PolicyEpisode.__new__(PolicyEpisode)
    log.replans = [{"latency_ms": v} for v in (300.16281050001226, 889.8777127500637, 120.04)]
    log.held, log.late = 0, 0
    rt = log.realtime_record({"ticks": 10})
    assert rt["replan_ms_p50"] == 300.2 and rt["replan_ms_p95"] == 830.9
    assert f"{rt['replan_ms_p50']}/{rt['replan_ms_p95']}" == "300.2/830.9"
