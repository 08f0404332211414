"""Paired comparisons of two arms on the same episodes (issue 48): Newcombe's paired interval,
McNemar's exact test, and the study report judging on them when every episode pairs."""
import pytest

from vam_experiments.study_stats import diff_interval, episode_key, pair_outcomes, paired_diff

pytestmark = pytest.mark.unit


def _arms(both, a_only, b_only, neither):
    a = [True] * both + [True] * a_only + [False] * b_only + [False] * neither
    b = [True] * both + [False] * a_only + [True] * b_only + [False] * neither
    return a, b


def test_newcombes_paired_example():
    """Newcombe (1998), paired example: 12 both, 9 A only, 2 B only, 21 neither (n = 44)."""
    r = paired_diff(*_arms(12, 9, 2, 21))
    assert r["diff"] == pytest.approx(7 / 44)
    assert r["ci95"][0] == pytest.approx(0.01, abs=0.005) and r["ci95"][1] == pytest.approx(0.30, abs=0.01)
    assert r["mcnemar_p"] == pytest.approx(2 * (1 + 11 + 55) / 2 ** 11)
    assert (r["a_only"], r["b_only"], r["pairs"]) == (9, 2, 44)


def test_pairing_narrows_the_interval_when_arms_agree_on_most_episodes():
    a, b = _arms(56, 12, 2, 30)
    paired = paired_diff(a, b)
    _, lo, hi = diff_interval(sum(a), len(a), sum(b), len(b))
    assert paired["diff"] == pytest.approx(0.10)
    assert paired["ci95"][1] - paired["ci95"][0] < 0.6 * (hi - lo)
    assert paired["ci95"][0] > 0 > lo                      # decided paired, not unpaired


def test_identical_arms_and_one_sided_discordance():
    same = paired_diff(*_arms(5, 0, 0, 5))
    assert same["diff"] == 0 and same["ci95"][0] < 0 < same["ci95"][1] and same["mcnemar_p"] == 1.0
    one_way = paired_diff(*_arms(0, 10, 0, 10))
    assert one_way["ci95"][0] > 0 and one_way["mcnemar_p"] == pytest.approx(2 / 2 ** 10)
    with pytest.raises(ValueError, match="equally long"):
        paired_diff([True], [True, False])


def test_outcomes_pair_on_suite_seed_task_and_repetition():
    ep = lambda task, rep, ok: {"suite": "goal", "seed": 0, "task": task, "episode": rep, "success": ok}
    a = {episode_key(e): e["success"] for e in (ep(0, 0, True), ep(1, 0, False), ep(2, 0, True))}
    b = {episode_key(e): e["success"] for e in (ep(1, 0, True), ep(0, 0, True))}
    assert pair_outcomes(a, b) == ([True, False], [True, True])
