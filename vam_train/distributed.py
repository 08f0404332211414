"""Data parallel: `ranks` processes (torch.distributed) each assemble their slice of every batch;
gradients are averaged, rank 0's clock decides stage and stop, rank 0 alone writes the run.

One mechanism for every machine: each rank's process group comes from the environment
(`init_method="env://"`: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and `run_rank`
trains it.
- GPUs, one or many nodes: launch with torchrun, one process per GPU (NCCL; rank r trains on
  cuda:LOCAL_RANK), e.g. `torchrun --nproc_per_node 8 -m vam_cli.main train --config ...`; torchrun
  sets the variables and its WORLD_SIZE is `ranks`.
- CPU (`train.ranks` > 1 without torchrun): `fit_data_parallel` spawns the ranks on this machine and
  sets the same variables as torchrun would (gloo).
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vam_stack.config import ConfigError
from vam_data.dataset import Dataset
from .stopping import StopRequest, die_with_parent, interrupted_message
from .train_config import TrainConfig
from .trainer import Trainer, describe_result, resolve_device

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def torchrun_env() -> dict[str, int] | None:
    """{rank, world, local} when this process is one rank of a launched group (torchrun sets RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT); None otherwise. Half a set is an error."""
    present = [v for v in TORCHRUN_VARS if v in os.environ]
    if not present:
        return None
    missing = [v for v in TORCHRUN_VARS if v not in os.environ]
    if missing:
        raise ValueError(f"torch.distributed environment is incomplete: {present} set, {missing} missing "
                         f"(launch with torchrun)")
    try:
        rank, world, local = (int(os.environ[v]) for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    except ValueError:
        raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK must be integers, got {os.environ['RANK']!r}, "
                         f"{os.environ['WORLD_SIZE']!r}, {os.environ['LOCAL_RANK']!r}") from None
    if not (world >= 1 and 0 <= rank < world and local >= 0):
        raise ValueError(f"RANK {rank} / WORLD_SIZE {world} / LOCAL_RANK {local} do not describe a rank of a group")
    return {"rank": rank, "world": world, "local": local}


def run_rank(cfg: TrainConfig, out: str | Path, resume: bool = False, ship: str | None = None,
             data: Dataset | None = None, model_cfg=None, stop: StopRequest | None = None) -> dict | None:
    """Train as one rank of the group the environment describes (torchrun's, or `fit_data_parallel`'s);
    returns rank 0's result (None on the other ranks). `stop`: this process's SIGINT/SIGTERM request
    (stopping.py); every rank stops at the same step and rank 0 keeps that step's checkpoint."""
    env = torchrun_env()
    if env is None:
        raise RuntimeError("run_rank needs the torch.distributed environment (torchrun, or fit_data_parallel)")
    rank, world, local = env["rank"], env["world"], env["local"]
    if cfg.ranks not in (1, world):
        raise ConfigError(f"train.ranks={cfg.ranks!r} but torchrun started {world} processes; set ranks to "
                          f"{world} or leave it at 1 (the launcher decides)")
    if cfg.batch % world:
        raise ConfigError(f"train.batch={cfg.batch!r} must split evenly over the {world} ranks")
    cfg = replace(cfg, ranks=world)
    device = resolve_device(cfg.device)
    if device.type == "cuda":
        if local >= torch.cuda.device_count():
            raise ConfigError(f"LOCAL_RANK {local} but this node has {torch.cuda.device_count()} GPUs: "
                              f"--nproc_per_node must not exceed them")
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world)
    try:
        trainer = Trainer(cfg, out, data=data, model_cfg=model_cfg, rank=rank, device=device)
        trainer.stop = stop
        if stop is not None:
            stop.armed = True
        if resume:
            trainer.load_state()
            if rank == 0:
                print(f"resumed at step {trainer.step} ({trainer.elapsed / 60:.1f} min trained)", flush=True)
        result = trainer.fit(progress=rank == 0)
        if rank != 0:
            return None
        if result.get("interrupted"):
            return result
        print(describe_result(result | {"ranks": world, "backend": backend}), flush=True)
        if ship:
            path = trainer.export(Path(ship))
            print(f"shipped {path} ({path.stat().st_size / 1e6:.1f} MB)")
        return result
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fit_data_parallel(cfg: TrainConfig, out: str | Path, resume: bool = False, ship: str | None = None,
                      data: Dataset | None = None, model_cfg=None) -> int:
    """Train with cfg.ranks CPU processes on this machine: spawned (torch.multiprocessing) with the
    environment torchrun would give them (localhost, a free port), each running `run_rank` over gloo.
    A rank that fails ends the others (spawn terminates them) and its error is raised here.
    SIGINT/SIGTERM to this process go on to every rank as SIGTERM (they stop together at one step,
    rank 0 keeps its checkpoint, stopping.py) and this waits for them; a second signal kills them.
    Returns the number of the signal that stopped the run, or 0."""
    ctx = mp.start_processes(_spawned_rank, args=(cfg, str(out), resume, ship, _free_port(), data, model_cfg),
                             nprocs=cfg.ranks, join=False, start_method="spawn")
    got: list[int] = []

    def forward(signum, _frame) -> None:
        got.append(signum)
        how = signal.SIGTERM if len(got) == 1 else signal.SIGKILL
        for p in ctx.processes:
            if p.is_alive():
                try:
                    os.kill(p.pid, how)
                except ProcessLookupError:
                    pass

    installed = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)} if installed else {}
    try:
        while not ctx.join():
            pass
    except mp.ProcessExitedException:
        if not got:                      # a rank failed by itself: its error, as spawn raises it
            raise
        # a second signal killed the ranks: what the last checkpoint holds is kept
        print(f"\n{signal.Signals(got[0]).name} twice: every rank killed; {Path(out) / 'train_state.pt'} holds the "
              f"last checkpoint written", file=sys.stderr, flush=True)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return got[0] if got else 0


def _spawned_rank(rank: int, cfg: TrainConfig, out: str, resume: bool, ship: str | None, port: int,
                  data: Dataset | None, model_cfg) -> None:
    die_with_parent(signal.SIGTERM)      # never an orphan that trains on (SIGTERM: it checkpoints and exits)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(cfg.ranks), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    stop = StopRequest()
    with stop.installed():
        result = run_rank(cfg, out, resume, ship, data, model_cfg, stop=stop)
    if result is not None and result.get("interrupted"):
        print("\n" + interrupted_message(result, Path(out)), file=sys.stderr, flush=True)
