"""`vam-stack bench ros` end to end on a short window: the graph's processes over DDS, numbers out."""
import argparse
import json

import pytest

from vam_bench import ros_graph as bench

pytestmark = [pytest.mark.adapter, pytest.mark.slow]


def test_bench_ros_measures_the_graph_and_writes_json(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "ros.json"
    args = parser.parse_args(["--seconds", "3", "--warmup", "1", "--estops", "2", "--json", str(out),
                              "--log-dir", str(tmp_path / "logs")])
    assert bench.run(args) == 0
    r = json.loads(out.read_text())
    assert set(r["exit_codes"]) == {"camera_bridge", "vam_policy_node", "tr_monitor_node", "yam_driver"}
    assert r["camera_to_policy"]["published"] > 30 and 0 <= r["camera_to_policy"]["drop_rate"] <= 1
    assert r["camera_to_policy"]["latency_ms_p50"] <= r["camera_to_policy"]["latency_ms_p99"]
    assert r["policy_to_driver"]["received"] > 30 and r["policy_to_driver"]["period_ms_p50"] > 0
    assert r["estop_to_driver_hold"]["n"] == 2 and r["estop_to_driver_hold"]["ms_max"] < 1000
    assert "e-stop -> driver hold" in capsys.readouterr().out
    assert set(r["messages"]) == {"send", "receive"}


def test_messages_only_times_both_ways_per_message_without_a_graph(tmp_path, capsys, monkeypatch):
    # issue 69 row 2: the per-message cost before (rosbags + to_ros / from_ros) and now (rclpy_msgs)
    monkeypatch.setattr(bench, "measure", lambda args: pytest.fail("--messages-only starts no graph"))
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "m.json"
    assert bench.run(parser.parse_args(["--messages-only", "--json", str(out)])) == 0
    m = json.loads(out.read_text())["messages"]
    for way in ("send", "receive"):
        assert m[way]["joints"] == 14 and m[way]["before_us"] > 0 and m[way]["after_us"] > 0
        assert m[way]["ratio"] == pytest.approx(m[way]["before_us"] / m[way]["after_us"])
    printed = capsys.readouterr().out
    assert "send before" in printed and "receive before" in printed


@pytest.mark.parametrize("bad, match", [(["--seconds", "0"], "--seconds"), (["--estops", "0"], "--estops")])
def test_bench_ros_refuses_bad_arguments_before_starting_anything(bad, match):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    with pytest.raises(ValueError, match=match):
        bench.measure(parser.parse_args(bad))
