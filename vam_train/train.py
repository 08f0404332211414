"""Train the video-action model on a collected dataset (joint or two-stage); `vam-stack train`'s
command line is vam_cli/train.py.

    vam-stack train --config config/train_tiny.yaml --out runs/tiny [--resume] [--steps N]

Modes (method spec, "training"):
  joint      L = L_action + lambda L_video from one DiT forward per batch (lambda = 1);
  two_stage  stage 1: L_video only (tokenizer + DiT); stage 2: DiT frozen, block-k features
             computed without gradients ("cached") and reused for `feature_reuse` head
             updates with fresh action noise;
  video      L_video only for the whole run: pretraining a "foundation" DiT on video the action
             data never shows (the paper study's goal_video set); its head stays at init.
Starting from a pretrained backbone (`init_from`), `lora_rank` > 0 wraps the DiT's attention
and MLP projections with LoRA adapters (peft) and freezes the rest of the DiT; the export
merges the adapters into plain weights.

Recovery rounds (`recovery.at`, see recovery.py; the rollouts: vam_sim/collect_recovery.py): at those fractions of the run the current
EMA weights drive the policy in the mocked LIBERO bridge (the simulated YAM for a yam_mujoco
dataset), the scripted expert takes over at replan boundaries, and its segments join the
training data (OUT/recovery/round_<r>/; their minutes count against the time budget; a resumed
run reloads the rounds it already collected). A round in which no takeover finished is
recorded (its summary.json says why) and the run trains on without it.

The run stops at `steps` or at `time_budget_min` minutes of training (whichever comes first;
the learning-rate schedule follows the same progress), writes OUT/train_state.pt (weights,
EMA, optimiser, step, elapsed time) every `checkpoint_every` steps and at the end, and
exports OUT/model.safetensors (EMA weights, normalisation stats, text-encoder spec) that
`build_policy` loads. `--resume` continues from OUT/train_state.pt (tensors and plain values
only, read with torch.load(weights_only=True): a file carrying other pickled objects is refused);
a step's data and noise depend only on (seed, step), so a resumed run sees the same batches as
an uninterrupted one.
Data parallel: on GPUs launch with torchrun (one process per GPU, NCCL: `torchrun --nproc_per_node N
-m vam_cli.main train ...`, on one node or many); on the CPU `ranks` > 1 spawns that many processes
with the same environment torchrun gives (gloo). Each rank assembles its slice of every batch and
draws its own noise; gradients are averaged, so a step is still one `batch`. Rank 0's clock decides the stage switch and the stop, and rank 0 alone
writes OUT (after checking that the ranks' weights agree). Recovery rounds need ranks 1.
Progress: a tqdm bar and OUT/log.jsonl (one line per `log_every` steps; `data_s` is how long
that step waited for its batch, so a GPU run shows whether the loader keeps up).

Devices: `device` cpu | cuda | auto. The model is initialised on the CPU and moved, and all
noise comes from the CPU generator, so a step's data and noise are the same on any device
(the arithmetic is not bit-identical across devices). For GPUs, `amp: bf16` autocasts the
forward passes, `cache_frames` decodes the dataset's PNG frames into RAM once and
`loader_threads` assembles batches in parallel (config/train_tiny.yaml, `--variant gpu`).

The pieces: train_config.py (TrainConfig, variants, --set), batches.py (data and batches),
lora.py, trainer.py (Trainer), recovery.py (rounds), distributed.py and data_parallel.py (ranks);
this module is a run (`train`).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from vam_stack.config import ConfigError, to_dict
from vam_stack.outputs import remove_empty_dirs
from vam_stack.recording import Interrupted

from vam_model.networks.config import load_config
from vam_model.networks.text_encoder import TextEncoder, save_text_embeddings
from .batches import Batches, check_dataset_fits, load_train_data
from .distributed import fit_data_parallel, run_rank, torchrun_env
from .lora import apply_lora, merge_lora
from .recovery import Rollouts
from .stopping import StopRequest, interrupted_message
from .trainer import Trainer, describe_result, resolve_device
from .train_config import TrainConfig, load_train_config, parse_sets


def write_text_embeddings(cfg: TrainConfig, path: str | Path, instructions: list[str]) -> tuple[Path, int]:
    """Embed each of `instructions` with cfg.text_encoder into `path` (for train.text_embeddings on a
    machine without the encoder); returns (path, how many). The encoder runs on cfg.threads torch
    threads, as the Trainer's does: another thread count splits the matmul sums differently (up to
    5e-6 apart on a 2-core machine), and the file would not replace the encoder exactly."""
    d = load_config(cfg.preset).dit
    enc = TextEncoder(cfg.text_encoder, d.text_tokens, d.text_in_dim)
    names = sorted(set(instructions))
    before = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        table = {n: enc.encode(n) for n in names}
    finally:
        torch.set_num_threads(before)
    return save_text_embeddings(path, cfg.text_encoder, table), len(names)


def claim_run_dir(out: Path, resume: bool, overwrite: bool) -> None:
    """A fresh run never writes over an earlier one: an OUT holding a train_state.pt, a
    model.safetensors or a non-empty log.jsonl (a run stopped before its first checkpoint: a new run
    would append its lines to that log) is refused unless `resume` (continue it: it needs the
    train_state.pt) or `overwrite` (replace it; its log.jsonl is started anew). Checked before
    anything is loaded or written."""
    if resume and overwrite:
        raise ConfigError("vam-stack train: --resume continues the run in --out and --overwrite replaces it; "
                          "pass one of them")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {str(out)!r} is a file, not a run directory")
    earlier = [n for n in ("train_state.pt", "model.safetensors") if (out / n).is_file()]
    log = out / "log.jsonl"
    if not earlier and log.is_file() and log.stat().st_size and not overwrite:
        lines = len(log.read_text(errors="replace").splitlines())
        raise FileExistsError(f"--out {str(out)!r} holds an earlier run's log.jsonl ({lines} lines) but no "
                              f"checkpoint (it stopped before its first one): pass --overwrite to start afresh "
                              f"there, or choose another directory")
    if earlier and not resume and not overwrite:
        raise FileExistsError(f"--out {str(out)!r} holds an earlier run ({', '.join(earlier)}): pass --resume to "
                              f"continue it, --overwrite to replace it, or choose another directory")
    if overwrite and log.is_file():
        log.unlink()


def _forget_fresh_dir(out: Path, created: bool) -> None:
    """After an interrupt with nothing kept: the files this run wrote (config.json, an empty log) go,
    and OUT too when this run created it, so the same command runs again as if never started."""
    for name in ("config.json", "log.jsonl"):
        f = out / name
        if f.is_file() and (name == "config.json" or not f.stat().st_size):
            f.unlink()
    if created:
        remove_empty_dirs(out, keep_root=False)


def train(cfg: TrainConfig, out: str | Path, resume: bool = False, overwrite: bool = False, ship: str | None = None,
          rollouts: Rollouts | None = None) -> int:
    """A training run into `out` (one process, `cfg.ranks` spawned ones, or this torchrun rank): refuses
    an earlier run's OUT (claim_run_dir), writes OUT/config.json, trains, prints the result and, with
    `ship`, copies the exported weights there. `rollouts`: the recovery rounds' simulator (Trainer).
    Returns the exit status: 0, or 128 + the signal's number when SIGINT/SIGTERM stopped the run
    (vam_train/stopping.py: every rank stops at one step, the checkpoint of that step is kept, or
    "nothing kept" is said)."""
    out = Path(out)
    env = torchrun_env()
    if env is not None:          # launched by torchrun: this process is one rank (rank 0 claims and writes OUT)
        if env["rank"] == 0:
            claim_run_dir(out, resume, overwrite)
            out.mkdir(parents=True, exist_ok=True)
            (out / "config.json").write_text(json.dumps(to_dict(cfg) | {"ranks": env["world"]}, indent=2) + "\n")
        stop = StopRequest()
        with stop.installed():
            result = run_rank(cfg, out, resume=resume, ship=ship, stop=stop)
        if result is not None and result.get("interrupted"):
            print(interrupted_message(result, out), file=sys.stderr, flush=True)
        return 128 + stop.signum if stop.signum else 0
    claim_run_dir(out, resume, overwrite)
    if cfg.ranks > 1 and resolve_device(cfg.device).type == "cuda":
        raise ConfigError(f"train.ranks={cfg.ranks} on GPUs: launch one process per GPU with torchrun, e.g. "
                          f"`torchrun --nproc_per_node {cfg.ranks} -m vam_cli.main train ...` (docs/your_data.md)")
    created = not out.exists()
    if cfg.ranks > 1:            # the ranks load the data themselves: a bad dataset is named here, not in a rank
        check_dataset_fits(load_train_data(cfg), load_config(cfg.preset))
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(to_dict(cfg), indent=2) + "\n")
        signum = fit_data_parallel(cfg, out, resume=resume, ship=ship)
        if signum and not (out / "train_state.pt").is_file():
            _forget_fresh_dir(out, created)
        return 128 + signum if signum else 0
    stop = StopRequest(force_second=True)
    try:
        with stop.installed():
            trainer = Trainer(cfg, out, rollouts=rollouts)
            if resume:
                trainer.load_state()
                print(f"resumed at step {trainer.step} ({trainer.elapsed / 60:.1f} min trained)", flush=True)
            (out / "config.json").write_text(json.dumps(to_dict(cfg), indent=2) + "\n")
            trainer.stop, stop.armed = stop, True
            result = trainer.fit()
    except Interrupted as e:              # before the step loop, or a second signal: nothing more is written
        if not resume and not (out / "train_state.pt").is_file():
            _forget_fresh_dir(out, created)
            print(f"\ninterrupted ({e.args[0]}) before training started: nothing kept", file=sys.stderr)
        else:
            print(f"\ninterrupted ({e.args[0]}) again: stopped at once; {out / 'train_state.pt'} holds the last "
                  f"checkpoint written", file=sys.stderr)
        return 128 + e.signum
    if result.get("interrupted"):
        if result.get("kept") is None:
            _forget_fresh_dir(out, created)
        print("\n" + interrupted_message(result, out), file=sys.stderr, flush=True)
        return 128 + stop.signum
    print(describe_result(result), flush=True)
    if ship:
        path = trainer.export(Path(ship))
        print(f"shipped {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


# the training API, importable from here as before the split
__all__ = ["TrainConfig", "Trainer", "Batches", "fit_data_parallel", "train", "apply_lora",
           "merge_lora", "load_train_config", "load_train_data", "check_dataset_fits", "resolve_device",
           "claim_run_dir", "write_text_embeddings", "parse_sets"]

