"""The real-LIBERO runner and check; real LIBERO itself only where $VAM_LIBERO_PYTHON is set."""
import argparse
import os

import pytest

from vam_sim.libero_mock.runner import SimConfig
from vam_sim.libero_real import check
from vam_sim.libero_real.runner import RealLiberoRunner

REAL = os.environ.get("VAM_LIBERO_PYTHON")


@pytest.mark.unit
def test_runner_refuses_what_real_libero_lacks(tmp_path):
    with pytest.raises(ValueError, match="'goal_ood'"):
        RealLiberoRunner(SimConfig(suite="goal_ood"), tmp_path)


@pytest.mark.sim
def test_runner_closes_the_loop_through_the_server(tmp_path):
    cfg = SimConfig(suite="goal", episodes=1, max_steps=10, guidance="none", record=False, plots=True)
    with RealLiberoRunner(cfg, tmp_path, backend="mock") as runner:
        ep = runner.run_episode(0)
    assert ep["steps"] == 10 and ep["termination"] == "timeout" and ep["backend"] == "mock_via_server"
    assert [r["step"] for r in ep["replans"]] == [0]
    assert (tmp_path / ep["tr_trace"]).is_file()


@pytest.mark.sim
def test_the_expert_runs_through_the_server_on_the_benchmarks_initial_state(tmp_path):
    cfg = SimConfig(suite="goal", episodes=1, policy="expert", record=False, plots=False)
    with RealLiberoRunner(cfg, tmp_path, backend="mock") as runner:
        ep = runner.run_episode(8)                        # the mock's expert answers through the same protocol
    assert ep["success"] and ep["policy"] == "expert" and ep["init_state"] == 0


def _check_args(*argv):
    p = argparse.ArgumentParser()
    check.add_arguments(p)
    return p.parse_args(list(argv))


@pytest.mark.adapter
def test_check_passes_mock_against_itself_and_flags_what_a_policy_would_notice(tmp_path):
    assert check.run(_check_args("--backend", "mock", "--suite", "libero_goal", "--json", str(tmp_path / "r.json"),
                                 "--markdown", str(tmp_path / "t.md"))) == 0
    import json

    rep = json.loads((tmp_path / "r.json").read_text())
    assert "| task 0 | open the middle drawer of the cabinet |" in (tmp_path / "t.md").read_text()
    real = rep["real"]
    swapped = dict(real, agent_px={k: v[::-1] for k, v in real["agent_px"].items()},   # x and y swapped
                   finger_gap=real["finger_gap"][::-1][1:] + [0.0],                     # gripper sign flipped
                   translation={k: 2 * v for k, v in real["translation"].items()},       # twice the speed
                   instructions=real["instructions"][::-1], max_steps=150,
                   reset_pos=[v + 0.1 for v in real["reset_pos"]])
    fail, _, _ = check.compare(rep["mock"], swapped)
    for words in ("gripper in the agent view", "gripper sign", "m per step", "task 0", "episode limit",
                  "reset eef position"):
        assert any(words in f for f in fail), (words, fail)


@pytest.mark.unit
def test_check_takes_liberos_suite_names_and_refuses_mock_only_suites():
    with pytest.raises(SystemExit, match="only in the mock"):
        check.run(_check_args("--backend", "mock", "--suite", "goal_ood"))


@pytest.mark.slow
@pytest.mark.skipif(not REAL, reason="real LIBERO needs its own environment: set VAM_LIBERO_PYTHON=<venv>/bin/python")
def test_mock_conventions_match_real_libero():
    assert check.run(_check_args("--libero-python", REAL)) == 0
