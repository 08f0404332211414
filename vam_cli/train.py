"""`vam-stack train`: its command line; the training run is vam_train/train.py (`train`), the
recovery rounds' rollouts vam_sim/collect_recovery.py.

    vam-stack train --config config/train_tiny.yaml --out runs/tiny [--resume] [--steps N]
"""
from __future__ import annotations

import argparse
from dataclasses import replace

from vam_stack.paths import config_dir

from vam_sim import collect_recovery
from vam_sim.libero_mock.tasks import SUITES, suite_tasks
from vam_train.train import train, write_text_embeddings
from vam_train.train_config import DEVICES, MODES, load_train_config, parse_fractions, parse_sets


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=str(config_dir() / "train_tiny.yaml"), help="YAML file with a `train:` section")
    p.add_argument("--out", help="run directory (train_state.pt, model.safetensors, log.jsonl); required to train")
    p.add_argument("--resume", action="store_true", help="continue from OUT/train_state.pt")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh in an OUT that holds an earlier run (its train_state.pt, model.safetensors "
                        "and log.jsonl are replaced); without it such an OUT is refused")
    p.add_argument("--variant", help="lay the config's `variants: NAME:` overrides on its train section "
                                     "(e.g. gpu in train_tiny.yaml; earlier runs in train_yam64.yaml)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets",
                   help="override one train field (YAML value; dotted for nested: loss.action_samples=8); repeatable")
    p.add_argument("--dataset", help="override train.dataset")
    p.add_argument("--mode", choices=MODES, help="override train.mode")
    p.add_argument("--steps", type=int, help="override train.steps")
    p.add_argument("--time-budget-min", type=float, help="override train.time_budget_min")
    p.add_argument("--seed", type=int, help="override train.seed")
    p.add_argument("--device", choices=DEVICES, help="override train.device")
    p.add_argument("--text-embeddings", metavar="FILE", help="override train.text_embeddings")
    p.add_argument("--recovery-at", help="override train.recovery.at: comma-separated progress fractions of the "
                                         "recovery rounds, e.g. 0.3,0.55 ('' = no rounds)")
    p.add_argument("--ship", help="also copy the final exported weights to this path (e.g. models/libero64.safetensors)")
    p.add_argument("--write-text-embeddings", metavar="FILE",
                   help="only write the prompt embeddings of train.suites' instructions (all suites when empty) "
                        "to FILE for train.text_embeddings on a machine without the encoder, then exit")




def run(args: argparse.Namespace) -> int:
    cfg = load_train_config(args.config, {"dataset": args.dataset, "mode": args.mode, "steps": args.steps,
                                          "time_budget_min": args.time_budget_min, "seed": args.seed,
                                          "device": args.device, "text_embeddings": args.text_embeddings},
                            variant=getattr(args, "variant", None), sets=parse_sets(getattr(args, "sets", None)))
    if args.recovery_at is not None:
        cfg = replace(cfg, recovery=replace(cfg.recovery, at=parse_fractions(args.recovery_at, "--recovery-at")))
    if args.write_text_embeddings:
        suites = cfg.suites or SUITES            # all mocked suites when train.suites is empty
        path, n = write_text_embeddings(cfg, args.write_text_embeddings,
                                        [t.instruction for s in suites for t in suite_tasks(s)])
        print(f"wrote {n} instruction embeddings of {cfg.text_encoder} to {path} ({path.stat().st_size / 1e6:.1f} MB)")
        return 0
    if not args.out:
        raise SystemExit("vam-stack train: --out RUN_DIR is required (except with --write-text-embeddings)")
    return train(cfg, args.out, resume=args.resume, overwrite=getattr(args, "overwrite", False), ship=args.ship,
                 rollouts=collect_recovery)
