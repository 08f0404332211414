"""TR-by-block report: reads every head's TR studies, ID cell and swap test; table and figure."""
import json

import pytest

from vam_experiments.tr_block import load, rows, table, plot


def _study(base: float) -> dict:
    def stat(m):
        return {"mean": m, "std": 0.1, "n": 10, "ci95": [m - 0.05, m + 0.05]}

    sig = {str(i): {"sigma_v": s, "all": stat(base + 0.01 * i), "planning": stat(base - 0.1),
                    "manipulation": stat(base + 0.2)} for i, s in enumerate((1.0, 0.95, 0.88, 0.77, 0.56, 0.02))}
    return {"default_index": 2, "by_phase_at_default_index": {"planning": stat(base - 0.1),
                                                              "manipulation": stat(base + 0.2)},
            "by_sigma_v": sig, "checkpoint": "x.safetensors"}


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


@pytest.mark.unit
def test_tr_block_reads_every_head_and_reports(tmp_path):
    data = tmp_path / "tr_block"
    for k in (1, 2, 10):
        for suite in ("goal", "goal_ood"):
            _write(data / f"k{k}" / suite / "tr_study.json", _study(0.1 * k))
        _write(data / f"k{k}" / "eval_goal_none" / "results.json",
               {"by_guidance": {"none": {"counts": {"goal": [80 + k, 100]}}}})
    _write(data / "k1" / "tr_phase" / "tr_phase.json",
           {"rows": [{"swap_future": 0.001, "swap_current": 0.3}, {"swap_future": 0.003, "swap_current": 0.1}]})
    (data / "notes").mkdir()                                 # not a k<K> directory: ignored
    heads = load(data, None, None)
    assert [h["k"] for h in heads.values()] == [1, 2, 10]    # numeric order, not text order
    rs = rows(heads)
    assert rs[0]["goal_manipulation"]["mean"] == pytest.approx(0.3) and rs[0]["success"] == (81, 100)
    assert rs[0]["swap"] == pytest.approx((0.002, 0.2)) and "swap" not in rs[1]
    assert rs[2]["goal_sigma_range"] == pytest.approx((1.0, 1.05))
    text = table(rs)
    assert len(text.splitlines()) == 5 and "81/100 = 81 %" in text and "0.0020 / 0.200" in text
    assert plot(heads, tmp_path / "tr_block.png").stat().st_size > 5000
    with pytest.raises(SystemExit, match="no k<K>"):
        load(tmp_path / "empty", None, None)
