"""Offline action error of two trained policies on held-out expert states (docs/your_data.md, the amendment).

    python scripts/compare_action_error.py --a runs/issue46/train_rec/model.safetensors \
        --b runs/issue46/train_collect/model.safetensors --states runs/issue46/heldout_seed0 \
        --out runs/issue46/action_error.json

For every `--every`-th step of every held-out episode: each policy's unguided chunk for that frame and
those joints, with the same noise seed for both; the error is mean |predicted - expert| over the
executed actions (arm joints [rad] and grippers separately). The paired difference A - B gets a 95 %
interval from a bootstrap over episodes; the verdict follows the rule written before the run.
"""
from __future__ import annotations

import argparse
import json

import numpy as np


def errors(checkpoint: str, ds, every: int, execute: int) -> list[dict]:
    from vam_model.policy import build_policy

    policy = build_policy(checkpoint=checkpoint, guidance="none")
    rows, k = [], 0
    for e, ep in enumerate(ds.episodes):
        policy.reset(ep.meta["instruction"])
        frames = ep.decode_all()
        n = len(ep)
        for t in range(0, n, every):
            policy.reseed(1000 + k)
            out = policy.infer({"frame": frames[t], "proprio": ep.proprio[t]})
            pred = np.asarray(out["actions"], np.float64)[:execute]                       # [30, 14]
            target = ep.actions[np.minimum(np.arange(t, t + execute), n - 1)].astype(np.float64)
            diff = np.abs(pred - target)
            arm = [i for i in range(14) if i not in (6, 13)]
            rows.append({"episode": e, "step": t, "arm": float(diff[:, arm].mean()),
                         "gripper": float(diff[:, [6, 13]].mean())})
            k += 1
    return rows


def bootstrap(diff: np.ndarray, episodes: np.ndarray, resamples: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    ids = np.unique(episodes)
    means = []
    for _ in range(resamples):
        pick = rng.choice(ids, size=len(ids), replace=True)
        means.append(np.concatenate([diff[episodes == i] for i in pick]).mean())
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main() -> None:
    from vam_data.dataset import Dataset

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True)
    p.add_argument("--states", required=True, help="held-out expert dataset (vam-stack collect --seed 0)")
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--execute", type=int, default=30)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    ds = Dataset(args.states)
    ra, rb = errors(args.a, ds, args.every, args.execute), errors(args.b, ds, args.every, args.execute)
    ep = np.array([r["episode"] for r in ra])
    res = {"states": len(ra), "episodes": len(ds.episodes)}
    for part in ("arm", "gripper"):
        a, b = np.array([r[part] for r in ra]), np.array([r[part] for r in rb])
        lo, hi = bootstrap(a - b, ep)
        res[part] = {"a_mean": float(a.mean()), "b_mean": float(b.mean()), "diff": float((a - b).mean()),
                     "ci95": [lo, hi], "a_better_states": int((a < b).sum())}
    arm = res["arm"]
    margin = 0.10 * arm["b_mean"]
    lo, hi = arm["ci95"]
    arm["verdict"] = ("equivalent" if -margin <= lo and hi <= margin else "A better" if hi < 0 else
                      "A worse" if lo > 0 else "undecided")
    arm["margin"] = margin
    json.dump(res | {"a": args.a, "b": args.b, "per_state": {"a": ra, "b": rb}}, open(args.out, "w"), indent=1)
    for part in ("arm", "gripper"):
        r = res[part]
        print(f"{part}: A {r['a_mean']:.4f}  B {r['b_mean']:.4f}  A-B {r['diff']:+.4f} [{r['ci95'][0]:+.4f}, "
              f"{r['ci95'][1]:+.4f}] (episode bootstrap); A lower in {r['a_better_states']}/{res['states']} states")
    print(f"verdict (arm joints, margin +-{margin:.4f} rad): {arm['verdict']}")


if __name__ == "__main__":
    main()
