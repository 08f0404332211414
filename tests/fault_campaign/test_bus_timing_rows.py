"""Fault campaign (issue 58): the bus under timing it does not control. Each test is one row of
the issue and fails on the behaviour before the fix."""
import time

import numpy as np
import pytest

from yam_driver.config import load_config
from yam_driver.driver import YamDriver
from yam_driver.faults import Mode
from yam_driver.emulators import EmulatedRig

pytestmark = pytest.mark.adapter


def test_replies_waiting_in_the_queue_when_a_late_thread_reads_them_are_taken():
    """Issue 58 row 6: replies discarded after the deadline. The bus checked the deadline before
    reading, so a reply that arrived in time but was read late by a descheduled thread (a loaded
    host) counted as "no reply"; three such ticks faulted all 14 joints. Here every motor answers
    1 ms after its request (within the 4 ms reply timeout), and the driver thread is made late:
    after each frame it sends, it stays away until that reply is in the receive queue and the
    round's deadline has passed. The bus must still take those replies: no joint fails."""
    cfg = load_config(bus="damiao")
    with EmulatedRig(cfg, tau_s=0.003) as rig:
        driver = YamDriver(rig.config)
        driver.start()
        for name in cfg.joint_names:
            faults, motor_id = rig.faults(name)
            faults.delay(motor_id, 0.001)
        driver.set_targets(driver._present.copy())
        bus = driver.bus
        deadline: list[float | None] = [None]
        transact = bus._transact

        def spy(frames, dl, *args, **kwargs):     # note the round's deadline (None: connect/enable rounds)
            deadline[0] = dl
            return transact(frames, dl, *args, **kwargs)

        bus._transact = spy
        for ch in bus.channels.values():
            emu = next(e for e in rig.emulators.values() if e.channel == ch.name)

            def late_send(msg, timeout=None, _send=ch.bus.send, _emu=emu):
                before = _emu.replies_sent
                _send(msg, timeout)
                t_end = time.monotonic() + 1.0
                while _emu.replies_sent == before and time.monotonic() < t_end:   # the motor answers ...
                    time.sleep(0.0002)
                assert _emu.replies_sent > before, "the emulator did not answer"
                while deadline[0] is not None and time.monotonic() <= deadline[0]:   # ... the thread is away
                    time.sleep(0.001)

            ch.bus.send = late_send
        reports = []
        for _ in range(6):
            driver.set_targets(driver._present.copy())     # fresh targets: the ticks are slow here
            reports.append(driver.step())
            time.sleep(cfg.period_s)
        try:
            for r in reports:
                assert r.read_ok.all() and not r.errors, r.errors
                assert np.isfinite(r.written).all()
            assert not driver.faults and driver.mode != Mode.FAULT
        finally:
            driver.shutdown()
