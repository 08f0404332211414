"""Success rates come with a 95 % Wilson interval (pinned against the textbook values)."""
import pytest

from vam_sim.reports import markdown_table
from vam_sim.episode import success_intervals, wilson_interval

pytestmark = pytest.mark.unit


def test_wilson_interval_pinned_values():
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(80, 100) == pytest.approx((0.7112, 0.8666), abs=1e-4)
    with pytest.raises(ValueError, match="n >= 1"):
        wilson_interval(0, 0)


def test_eval_tables_show_the_interval_beside_k_of_n():
    eps = [{"suite": "goal", "success": i < 8} for i in range(10)]
    by = {"none": {"success_rate": {"goal": 0.8}, "counts": {"goal": [8, 10]}, "ci95": success_intervals(eps)}}
    assert "80.0 % (8/10) [49-94]" in markdown_table(["goal"], ["none"], by)
