"""`bench foundation` with a preset that has no Wan VAE is refused before any file is written
(issue 61 row 5). Before: `--preset libero64` wrote the DiT .pt, then raised
`AttributeError: 'VideoTokenizer' object has no attribute 'vae'`."""
from __future__ import annotations

import pytest

from vam_cli.main import entry

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("preset", ["libero64", "yam64", "tiny"])
def test_a_preset_without_the_wan_vae_is_one_line_and_writes_nothing(tmp_path, capsys, preset):
    work = tmp_path / "work"
    assert entry(["bench", "foundation", "--preset", preset, "--dir", str(work)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not the Wan VAE" in err and "real or libero" in err
    assert not work.exists()
