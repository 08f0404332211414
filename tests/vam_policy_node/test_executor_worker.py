"""ProcessPolicy: the policy contract across a process boundary."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from vam_bench.executor import CpuBurnPolicy
from vam_policy_node.executor_worker import PolicyProcessError, ProcessPolicy

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
