"""TR study: per-phase and per-sigma_v summaries of measured TR rows, and the plot."""
import pytest

from vam_experiments.tr_study import plot, summarise


def _rows():
    rows = []
    for state, phase in enumerate(["planning", "planning", "manipulation"]):
        for idx, sigma in ((0, 1.0), (2, 0.883), (5, 0.024)):
            rows.append({"state": state, "phase": phase, "task": 0, "index": idx, "sigma_v": sigma,
                         "tr": 1.0 + idx + (0.5 if phase == "planning" else 0.0)})
    return rows


@pytest.mark.unit
def test_summarise_splits_by_phase_and_sigma(tmp_path):
    s = summarise(_rows(), default_index=2)
    at = s["by_phase_at_default_index"]
    assert at["planning"] == {"mean": 3.5, "std": 0.0, "n": 2, "ci95": [3.5, 3.5]} and at["manipulation"]["mean"] == 3.0
    assert [s["by_sigma_v"][k]["sigma_v"] for k in ("0", "2", "5")] == [1.0, 0.883, 0.024]
    assert s["by_sigma_v"]["5"]["all"]["n"] == 3 and s["by_sigma_v"]["0"]["manipulation"]["mean"] == 1.0
    png = plot(s, tmp_path / "tr.png")
    assert png.stat().st_size > 5000


@pytest.mark.unit
def test_tr_study_command_rejects_bad_arguments_before_loading_a_model(tmp_path):
    from vam_cli.main import main

    out = str(tmp_path / "o")
    with pytest.raises(SystemExit, match="comma-separated integers"):
        main(["tr-study", "--checkpoint", "nope.safetensors", "--indices", "0,x", "--out", out])
    with pytest.raises(SystemExit, match="--episodes and --every"):
        main(["tr-study", "--checkpoint", "nope.safetensors", "--every", "0", "--out", out])
    with pytest.raises(SystemExit, match="is not a file"):
        main(["tr-study", "--checkpoint", str(tmp_path / "missing.safetensors"), "--out", out])


@pytest.mark.unit
def test_tr_study_never_writes_over_an_earlier_study_and_prints_a_table(tmp_path):
    from vam_cli.main import main
    from vam_experiments.tr_study import table
    from vam_stack.paths import models_dir

    out = tmp_path / "earlier"
    out.mkdir()
    (out / "tr_study.json").write_text("{}")
    with pytest.raises(FileExistsError, match="not empty"):   # refused before the model loads
        main(["tr-study", "--checkpoint", str(models_dir() / "libero64.safetensors"), "--out", str(out)])
    assert (out / "tr_study.json").read_text() == "{}"
    text = table(summarise(_rows(), default_index=2))
    assert len(text.splitlines()) == 5 and "3.500 [3.500, 3.500] n=2" in text and text.splitlines()[2].endswith("*")
