"""`export onnx` without `--checkpoint` refuses rather than export random weights (issue 61 row 3).

Before: `vam-stack export onnx --preset yam64 --out DIR`, as the README's command table wrote it,
exported seeded random weights, and only manifest.json said so.
"""
from __future__ import annotations

import pytest

from vam_cli import export as export_cli
from vam_cli.main import entry
from vam_model import export

pytestmark = pytest.mark.unit


def test_no_checkpoint_is_refused_in_one_line_before_anything_is_built(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(export_cli, "load_model", lambda *a, **k: pytest.fail("a model was built"))
    out = tmp_path / "onnx"
    assert entry(["export", "onnx", "--preset", "yam64", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no --checkpoint" in err and "--random-weights" in err
    assert "models/yam64.safetensors" in err                      # the shipped weights are named
    assert not out.exists()
    assert entry(["export", "onnx", "--random-weights", "--checkpoint", "models/yam64.safetensors",
                  "--out", str(out)]) == 2
    assert "choose one" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--random-weights"], ["--graph-only"], ["--checkpoint", "models/tiny.safetensors"]])
def test_random_weights_graph_only_or_a_checkpoint_export(tmp_path, monkeypatch, flag):
    built = []

    def fake_load(preset, checkpoint, seed, meta=False):
        built.append((preset, checkpoint, meta))
        raise SystemExit("stop after the checks")

    monkeypatch.setattr(export_cli, "load_model", fake_load)
    with pytest.raises(SystemExit, match="stop after the checks"):
        export_cli.run(_args(tmp_path, flag))
    assert len(built) == 1


def _args(tmp_path, flag):
    import argparse

    p = argparse.ArgumentParser()
    export_cli.add_arguments(p)
    return p.parse_args(["onnx", "--preset", "tiny", "--out", str(tmp_path / "o"), *flag])


def test_an_export_prints_no_exporter_noise(tmp_path, capfd):
    """Before: every first export printed "torchvision is not installed. Skipping torchvision::nms" (and
    roi_align, roi_pool, deform_conv2d) per graph, and torch's FutureWarning about LeafSpec."""
    import dataclasses
    import logging
    import warnings

    import torch

    from vam_model.networks.model import VideoActionModel

    cfg = export.load_model("tiny", meta=True).cfg
    small = dataclasses.replace(cfg, dit=dataclasses.replace(cfg.dit, layers=1, feature_block=1))
    torch.manual_seed(0)
    logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.NOTSET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export.export_onnx(VideoActionModel(small).eval(), tmp_path, head=False, progress=lambda m: None)
    err = capfd.readouterr().err
    assert "torchvision" not in err, err[:500]
    assert not [w for w in caught if "LeafSpec" in str(w.message)]
