"""`vam-stack bench foundation` at small size: published-format files written, imported by the
command as its own process, and the numbers it prints measured, not assumed."""
from __future__ import annotations

import yaml

from vam_bench.foundation import bench
from vam_model.networks.checkpoint import verify_checkpoint


def test_bench_imports_the_files_it_writes(tmp_path):
    from tests.vam_model.test_foundation import SMALL

    preset = tmp_path / "foundation_small.yaml"
    preset.write_text(yaml.safe_dump(SMALL))
    r = bench(str(preset), tmp_path / "work")
    assert r["import_s"] > 0 and r["peak_rss_gb"] > 0.1 and r["checkpoint_bytes"] > 1e5
    assert (tmp_path / "work" / "dit_ema_bf16.pt").is_file()
    verify_checkpoint(tmp_path / "work" / "foundation.safetensors")
    assert r["import_stdout"].startswith("wrote ")
