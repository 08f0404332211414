"""`vam-stack bench foundation`: time and peak memory of `vam-stack foundation import` at full size.

Writes files in the published formats with the published shapes and random values: NVIDIA's
native DiT `.pt` (bf16, `net.` keys, as the released `_ema_bf16.pt`) for the preset's DiT, and a
diffusers `vae/` folder for its Wan VAE. It then runs the import as its own process and reports
the wall time, the peak resident memory and the sizes. At `real` size it writes a 4.1 GB DiT
file and a 10.5 GB checkpoint; the import peaked at 12.5 GB of memory here (docs/model.md).
"""
from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="real", help="preset whose DiT/VAE shapes the files take: one built on the "
                                                         "Cosmos DiT and Wan VAE (real or libero; default real)")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one, removed afterwards)")
    parser.add_argument("--json", default=None, help="also write the results as JSON here ('-' = stdout)")


def write_published(preset: str, folder: Path) -> tuple[Path, Path]:
    """The preset's DiT as a native bf16 .pt and its VAE as a diffusers folder (random values)."""
    import torch

    from vam_model.foundation import native_name
    from vam_model.networks.config import load_config
    from vam_model.networks.model import VideoActionModel
    from vam_model.networks.tokenizer import VideoTokenizer

    cfg = load_config(preset)
    with torch.device("meta"):
        shapes = {k: t.shape for k, t in VideoActionModel(cfg).dit.model.state_dict().items()}
    g = torch.Generator().manual_seed(0)
    state = {native_name(k): (torch.randn(s, generator=g) * 0.02).to(torch.bfloat16) for k, s in shapes.items()}
    dit = folder / "dit_ema_bf16.pt"
    torch.save(state, dit)
    del state
    vae = folder / "vae"
    VideoTokenizer(cfg.tokenizer).vae.save_pretrained(vae)
    return dit, vae


def check_preset(preset: str) -> None:
    """The import fills a preset's Cosmos DiT and Wan VAE: a preset with its own frame encoder
    (tiny, libero64, yam64) is refused here, before any file is written (it raised an
    AttributeError after writing the DiT file)."""
    from vam_model.networks.config import load_config

    cfg = load_config(preset)
    if cfg.tokenizer.type != "wan":
        raise SystemExit(f"preset {preset!r} encodes frames with its own {cfg.tokenizer.type!r} encoder, not the Wan "
                         f"VAE the foundation import fills; bench a preset built on the public weights: real or libero")


def bench(preset: str, folder: Path) -> dict:
    check_preset(preset)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    dit, vae = write_published(preset, folder)
    written_s = time.monotonic() - t0
    out = folder / "foundation.safetensors"
    from vam_stack.process_graph import find_executable

    cmd = [find_executable("vam-stack"), "foundation", "import", "--preset", preset,   # as a user runs it
           "--transformer", str(dit), "--vae", str(vae), "--out", str(out)]
    t1 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t1
    if proc.returncode != 0:
        raise RuntimeError(f"import failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss            # Linux: kilobytes
    return {"preset": preset, "import_s": round(wall, 1), "peak_rss_gb": round(peak_kb / 1e6, 2),
            "dit_file_gb": round(dit.stat().st_size / 1e9, 2),
            "vae_folder_gb": round(sum(f.stat().st_size for f in vae.iterdir()) / 1e9, 3),
            "checkpoint_gb": round(out.stat().st_size / 1e9, 2),
            "checkpoint_bytes": out.stat().st_size, "write_inputs_s": round(written_s, 1),
            "import_stdout": proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""}


def run(args: argparse.Namespace) -> int:
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="vam_foundation_bench_"))
    try:
        r = bench(args.preset, folder)
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"foundation import, preset {r['preset']}: {r['import_s']} s, peak RSS {r['peak_rss_gb']} GB; "
          f"native DiT {r['dit_file_gb']} GB + VAE {r['vae_folder_gb']} GB -> checkpoint {r['checkpoint_gb']} GB "
          f"(inputs written in {r['write_inputs_s']} s)")
    if args.json:
        from vam_stack.outputs import write_json_output
        write_json_output(args.json, r)
    return 0
