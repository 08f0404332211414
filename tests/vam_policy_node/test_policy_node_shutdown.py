"""The policy node's stop during its autostart (load and warm-up: seconds to minutes): SIGINT or
SIGTERM ends it at once (a KeyboardInterrupt out of the constructor, which ros.spin_nodes takes as
the operator's stop), where it went on past launch's SIGTERM (5 s) and SIGKILL (10 s)."""
from __future__ import annotations

import os
import signal
import time

import pytest

from vam_policy_node.startup import interruptible

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_autostart_interrupts_it_and_the_previous_handler_still_hears_it(sig):
    heard = []
    before = signal.signal(sig, lambda s, f: heard.append(s))
    try:
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt, match=signal.Signals(sig).name):
            with interruptible():
                os.kill(os.getpid(), sig)
                time.sleep(5.0)                      # a warm-up
        assert time.monotonic() - t0 < 1.0
        assert heard == [sig]                        # spin_nodes' handler notes the stop too
        assert signal.getsignal(sig) is not None and signal.getsignal(sig).__name__ == "<lambda>"
        os.kill(os.getpid(), sig)                    # after the block: the previous handler alone
        time.sleep(0.05)
        assert heard == [sig, sig]
    finally:
        signal.signal(sig, before)
