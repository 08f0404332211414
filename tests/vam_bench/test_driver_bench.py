"""The driver benchmark runs end to end on both emulators and writes its JSON."""
import argparse
import json

import pytest

from vam_bench import driver as bench

pytestmark = pytest.mark.sim


def test_bench_runs_both_buses_and_writes_json(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "driver.json"
    args = parser.parse_args(["--ticks", "10", "--seconds", "0.2", "--json", str(out)])
    assert bench.run(args) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["bus"] for r in results] == ["dynamixel", "damiao"]
    for r in results:
        assert r["motors"] == 14 and r["paced_ticks"] >= 1
        assert r["read_plus_write"]["p50_ms"] <= r["read_plus_write"]["p99_ms"]
    assert "r+w p50/p99 ms" in capsys.readouterr().out


def test_bench_rejects_bad_arguments():
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    with pytest.raises(SystemExit, match="--ticks"):
        bench.run(parser.parse_args(["--ticks", "2"]))


def test_every_fault_of_the_timed_run_is_counted(tmp_path, capsys, monkeypatch):
    # issue 70 row 7: `bench driver` printed "damiao faults: []" while 14 faults were logged in its timed
    # run (it listed the faults of the unpaced ticks only). A motor that stops answering 0.3 s into the
    # paced run must be counted and shown.
    import threading

    from yam_driver.driver import YamDriver

    real_run = YamDriver.run

    def run_with_a_fault(self, *a, **kw):
        def silence():
            rig = rigs[-1]
            injector, motor_id = rig.faults("left_joint3")
            injector.silence(motor_id)
        threading.Timer(0.3, silence).start()
        return real_run(self, *a, **kw)

    from yam_driver.emulators import EmulatedRig
    rigs = []
    real_init = EmulatedRig.__init__

    def keep(self, *a, **kw):
        real_init(self, *a, **kw)
        rigs.append(self)

    monkeypatch.setattr(EmulatedRig, "__init__", keep)
    monkeypatch.setattr(YamDriver, "run", run_with_a_fault)
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "driver.json"
    assert bench.run(parser.parse_args(["--bus", "damiao", "--ticks", "10", "--seconds", "1.5", "--json", str(out)])) == 0
    r = json.loads(out.read_text())["results"][0]
    assert any(f.startswith("left_joint3: ") for f in r["faults"]), r["faults"]
    assert r["fault_count"]["paced"] >= 1 and r["fault_count"]["total"] == len(r["faults"]), r["fault_count"]
    text = capsys.readouterr().out
    assert f"{r['fault_count']['total']} faults in the window (" in text and "left_joint3: " in text, text


def test_the_timed_loop_is_the_driver_nodes_bus_thread(tmp_path, monkeypatch):
    """issue 69 row 1: `bench driver` times the loop the driver node runs (`BusThread`), not one of its own."""
    from yam_driver import bus_thread, monitor

    started = []
    real_start = bus_thread.BusThread.start
    monkeypatch.setattr(bus_thread.BusThread, "start", lambda self: started.append(self) or real_start(self))
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "driver.json"
    assert bench.run(parser.parse_args(["--bus", "damiao", "--ticks", "10", "--seconds", "0.3", "--rt-priority", "0",
                                        "--json", str(out)])) == 0
    (r,) = json.loads(out.read_text())["results"]
    assert len(started) == 1 and started[0].pacer.resync and monitor.BusThread is bus_thread.BusThread
    assert r["paced_ticks"] >= 1 and r["sched_fifo"] is False          # --rt-priority 0: normal scheduling
    with pytest.raises(SystemExit, match="--rt-priority"):
        bench.run(parser.parse_args(["--rt-priority", "120"]))
