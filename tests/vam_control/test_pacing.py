"""The one deadline pacer: grid vs resync after a late tick, overruns, stop wakes it at once."""
from __future__ import annotations

import threading
import time

import pytest

from vam_control.pacing import DeadlinePacer

pytestmark = pytest.mark.unit


class StepClock:
    """A clock the test moves by hand; sleeping on it is not needed because every wait below
    starts after its deadline or the test advances the clock from another thread."""

    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_grid_mode_keeps_the_wall_clock_grid_after_a_late_tick():
    c = StepClock()
    p = DeadlinePacer(10.0, clock=c)                  # period 0.1 s
    p.start(delay_s=0.0)
    assert p.wait() == (0, 100.0)
    c.t = 100.25                                      # tick 1 was due at 100.1: 1.5 periods late
    k, _ = p.wait()
    assert k == 2 and p.missed == 1 and p.overruns == 1   # tick 1 skipped; tick 2 (due 100.2) runs now
    assert p.t0 + p.next_tick * p.period == pytest.approx(100.3)   # tick 3 stays on the grid


def test_resync_mode_puts_a_whole_period_after_a_late_tick():
    c = StepClock()
    p = DeadlinePacer(10.0, clock=c, resync=True)
    p.start(delay_s=0.0)
    p.wait()
    c.t = 100.17                                      # tick 1 due 100.1, woke 0.07 s late
    k, _ = p.wait()
    assert k == 1 and p.missed == 0 and p.overruns == 1
    assert p.t0 + p.next_tick * p.period == pytest.approx(100.27)  # not 100.2: no burst


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan")])
def test_a_rate_that_disables_pacing_is_refused(bad):
    with pytest.raises(ValueError, match="rate_hz"):
        DeadlinePacer(bad)


def test_a_stop_wakes_a_long_wait_at_once():
    p = DeadlinePacer(0.2)                            # a 5 s period
    p.start()
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    t0 = time.monotonic()
    assert p.wait(stop) is None
    assert time.monotonic() - t0 < 2.0 and p.ticks == 0


def test_ticks_on_time_are_not_overruns():
    class Ticking(StepClock):                         # time passes only while the pacer looks at it
        def __call__(self):
            self.t += 0.001
            return self.t

    p = DeadlinePacer(100.0, clock=Ticking(), spin_s=1.0)   # spin on the clock, no real sleeps
    p.start(delay_s=0.0)
    for _ in range(5):
        p.wait()
    assert p.ticks == 5 and p.overruns == 0 and p.missed == 0


def test_increasing_stamps_never_repeat_a_clock_that_stands_still():
    """Under use_sim_time a node's clock is the last /clock it received: two host-paced ticks read
    the same time and the driver refused the second target as out of order."""
    from vam_control.pacing import IncreasingStamps

    s = IncreasingStamps()
    got = [s.next(t) for t in (5_000_000, 5_000_000, 5_000_000, 4_000_000, 15_000_000)]
    assert got == [5_000_000, 5_001_000, 5_002_000, 5_003_000, 15_000_000] and s.bumped == 3
    epoch = 1_760_000_000 * 10**9            # a system-clock stamp: the bump survives the driver's float seconds
    a, b = s.next(epoch), s.next(epoch)
    assert b * 1e-9 > a * 1e-9
