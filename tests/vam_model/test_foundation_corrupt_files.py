"""`foundation inspect` / `foundation import` of a corrupt file: one line naming it, no traceback,
and no pickle code run without `--trust-pickle` (issue 61 row 14).

Before: a plain pickle `.pt` raised UnpicklingError (the second, non-mmap torch.load was outside
the handler), a truncated safetensors or one whose header claims 2**62 bytes raised
SafetensorError, a config.json holding a list raised AttributeError (and `null` silently skipped
the comparison with the preset), an index.json without `weight_map` raised KeyError.
"""
from __future__ import annotations

import json
import os
import pickle
import struct

import pytest
import torch
from safetensors.torch import save_file

from vam_cli.main import entry

pytestmark = pytest.mark.unit


class _Runs:
    """Unpickling this runs code: it creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _corrupt(root, marker):
    ok = root / "ok.safetensors"
    save_file({"x": torch.zeros(4, 4)}, str(ok))
    raw = ok.read_bytes()
    files = {
        "plain pickle": ("plain.pt", lambda p: p.write_bytes(pickle.dumps({"w": [1.0, 2.0]}))),
        "code in a plain pickle": ("runs.pt", lambda p: p.write_bytes(pickle.dumps({"w": _Runs(marker)}))),
        "code in a torch.save": ("runs_zip.pt", lambda p: torch.save({"w": _Runs(marker)}, p)),
        "truncated safetensors": ("cut.safetensors", lambda p: p.write_bytes(raw[:-10])),
        "header of 2**62": ("huge.safetensors", lambda p: p.write_bytes(struct.pack("<Q", 2 ** 62) + b"{}")),
    }
    out = {}
    for what, (name, write) in files.items():
        write(root / name)
        out[what] = (root / name, name)
    for what, cfg, index in (("config.json a list", [1, 2], None), ("config.json null", None, None),
                             ("index without weight_map", {}, {"metadata": {}})):
        folder = root / what.replace(" ", "_").replace(".", "_")
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
        save_file({"x": torch.zeros(2)}, str(folder / "m.safetensors"))
        if index is not None:
            (folder / "m.safetensors.index.json").write_text(json.dumps(index))
        name = "m.safetensors.index.json" if index is not None else "config.json"
        out[what] = (folder, name)
    return out


WHAT = ["plain pickle", "code in a plain pickle", "code in a torch.save", "truncated safetensors", "header of 2**62",
        "config.json a list", "config.json null", "index without weight_map"]


@pytest.mark.parametrize("what", WHAT)
@pytest.mark.parametrize("action", ["inspect", "import"])
def test_a_corrupt_foundation_file_is_one_line_naming_it(tmp_path, capsys, what, action):
    marker = tmp_path / "code_ran"
    path, name = _corrupt(tmp_path, marker)[what]
    argv = (["foundation", "inspect", str(path)] if action == "inspect" else
            ["foundation", "import", "--preset", "real", "--transformer", str(path), "--out", str(tmp_path / "o.safetensors")])
    assert entry(argv) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("reading the transformer")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("vam-stack foundation: error: ") and name in lines[0]
    assert not marker.exists()                                     # no code from the file ran
    if what.startswith("code in"):
        assert "--trust-pickle" in lines[0]
    assert not (tmp_path / "o.safetensors").exists()
