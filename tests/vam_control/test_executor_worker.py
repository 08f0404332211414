"""ProcessPolicy: the policy contract across a process boundary."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from vam_bench.executor import CpuBurnPolicy
from vam_control.executor_worker import PolicyProcessError, ProcessPolicy

pytestmark = pytest.mark.unit


def test_process_policy_forwards_spec_infer_reset_and_errors():
    local = CpuBurnPolicy(0.0, chunk=12, execute=6, action_dim=7, rate_hz=10.0)
    with ProcessPolicy(functools.partial(CpuBurnPolicy, 0.0, chunk=12, execute=6, action_dim=7, rate_hz=10.0)) as pol:
        assert (pol.spec.chunk, pol.spec.execute, pol.spec.action_dim, pol.spec.rate_hz) == (12, 6, 7, 10.0)
        pol.reset("task")
        got = pol.infer({"proprio": np.zeros(7, np.float32)})
        want = local.infer({})
        np.testing.assert_array_equal(got["actions"], want["actions"])
    # after close, calls fail clearly instead of hanging
    with pytest.raises(PolicyProcessError, match="not running"):
        pol.infer({})


def test_child_exception_comes_back_with_its_traceback_and_child_survives():
    # center of the wrong width: the fake's infer raises a numpy broadcasting ValueError
    with ProcessPolicy(functools.partial(CpuBurnPolicy, 0.0, action_dim=7, center=(0.0, 0.0))) as pol:
        with pytest.raises(PolicyProcessError, match="(?s)infer raised in the child process.*ValueError"):
            pol.infer({})
        pol.reset("still alive")


def test_process_policy_start_failure_is_reported():
    with pytest.raises(PolicyProcessError, match="(?s)failed to start.*TypeError"):
        ProcessPolicy(functools.partial(CpuBurnPolicy, 0.0, bogus_argument=1))


class Configurable(CpuBurnPolicy):
    """A fake policy that reports the settings `configure` gave it in each result."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.settings: dict = {}

    def configure(self, **changes):
        self.settings.update(changes)

    def infer(self, obs):
        return {**super().infer(obs), "settings": dict(self.settings)}


def test_configure_reaches_the_child_with_the_next_infer_without_waiting_for_one():
    with ProcessPolicy(functools.partial(Configurable, 0.0, action_dim=7)) as pol:
        assert pol.infer({})["settings"] == {}
        pol.configure(action_temperature=0.5, guidance=None)     # None: not changed
        pol.configure(action_temperature=0.25)                   # the newest value wins
        assert pol.infer({})["settings"] == {"action_temperature": 0.25}
        assert pol.infer({})["settings"] == {"action_temperature": 0.25}   # sent once, kept by the child


def test_close_abandons_an_inference_in_flight_within_a_second():
    """Launch sends SIGTERM 5 s after SIGINT: closing the policy at a node's stop must not wait for a
    replan (it waited up to 5 s for the infer and 5 s more for the child)."""
    import threading
    import time

    pol = ProcessPolicy(functools.partial(CpuBurnPolicy, 20_000.0, action_dim=7))    # a 20 s inference
    errors = []

    def infer():
        try:
            pol.infer({})
        except PolicyProcessError as e:
            errors.append(e)
    t = threading.Thread(target=infer, daemon=True)
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    pol.close()
    took = time.monotonic() - t0
    t.join(2.0)
    assert took < 1.0, f"close took {took:.2f} s with an inference in flight"
    assert not t.is_alive() and errors, "the waiting infer did not end with a PolicyProcessError"
    assert not pol._proc.is_alive()


def test_the_child_ignores_sigint_a_terminal_sends_to_the_whole_group(capfd):
    """A terminal's Ctrl-C reaches the policy's child too (launch's process group): it printed a
    KeyboardInterrupt traceback and died under the node; the node stops it (close)."""
    import os
    import signal
    import time

    with ProcessPolicy(functools.partial(CpuBurnPolicy, 0.0, action_dim=7)) as pol:
        os.kill(pol._proc.pid, signal.SIGINT)
        time.sleep(0.3)
        assert pol._proc.is_alive()
        assert pol.infer({})["actions"].shape == (50, 7)
    assert pol._proc.exitcode == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


class ReportsScheduling(CpuBurnPolicy):
    """A fake policy whose result says how its process is scheduled."""

    def infer(self, obs):
        import os
        return {**super().infer(obs), "sched": (os.sched_getscheduler(0) == os.SCHED_OTHER,
                                                os.getpriority(os.PRIO_PROCESS, 0))}


def test_the_inference_child_runs_with_normal_scheduling_at_its_nice_value():
    """issues 58/60: the control threads run SCHED_FIFO and the child inherits its creator's policy;
    it must not compete with them (vam_stack/realtime.py)."""
    with ProcessPolicy(functools.partial(ReportsScheduling, 0.0, action_dim=7), nice=7) as pol:
        assert pol.infer({})["sched"] == (True, 7)
