"""Why TR differs by phase: what each state's future holds, and what the head reads from it.

    vam-stack tr-phase --checkpoint models/study/libero64_lora4.safetensors --suite goal --episodes 20 \
        --every 5 --out docs/data/paper_study/tr_phase/lora_goal

The states are the TR study's (vam_experiments.tr_study: held-out expert episodes of seed id
`--seed`, every `--every`-th step, the same noise per state), read at the policy's extraction
index; or, with `--dataset`, states of a collected dataset's episodes (the real-LIBERO
demonstrations: a model trained on them has seen those states). For every state it records:
- `tr`: TR at the first Euler step, unguided (what the TR study and the policy report), and its
  two parts `mass_v0`, `mass_vplus`: the head-averaged attention mass of the action queries on
  the current frame's and on the future frames' tokens (does TR rise because V+ gains mass, or
  because V0 loses it?).
- `scene_change`: how much the scene ahead differs from now: the mean absolute pixel change
  (0-1) between the current views and the expert's next chunk of frames, on the model's own
  view size. This is what the video model is trained to imagine.
- `action_change`: how far the expert's upcoming actions depart from the current one: the mean
  over the chunk of |a_t+j - a_t|, in the policy's normalised units.
- `gripper_event`: whether the expert's gripper command changes sign within the chunk.
- `swap_future`, `swap_current`: what the head reads. The decoded chunk is compared (mean
  absolute change, normalised units, the same action noise) with the chunk decoded after the
  future frames' features V+, or the current frame's features V0, are replaced by those of a
  donor state from another episode. `future_share` = swap_future / (swap_future + swap_current):
  how much of the head's dependence on video lies in the imagined future.
- `future_gap`, `current_gap`: how different the swapped-in features are (relative L2 distance
  between the state's and the donor's V+, or V0, features). A small swap effect with a large gap
  means the head ignores those features; with a small gap, that they carry nothing state-specific.

OUT/tr_phase.json holds the rows, each quantity's mean by phase, and the rank correlation
(Spearman) of TR with each covariate, over all states and within each phase. Every interval is
a 95 % bootstrap over episodes, since states within an episode are not independent.
OUT/tr_phase.png plots them.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .tr_study import save_figure, state_arguments

MASSES = ("mass_v0", "mass_vplus")
COVARIATES = ("scene_change", "action_change", "gripper_event", "swap_future", "swap_current", "future_share")
GAPS = ("future_gap", "current_gap")
PHASES = ("planning", "manipulation")


def collect_states(suite: str, episodes: int, seed: int, every: int, chunk: int) -> list[dict]:
    """The TR study's states, each with the expert's next `chunk` frames and actions."""
    from vam_sim.libero_mock import LiberoMockConfig, rollout_expert

    mock = LiberoMockConfig.load()
    states = []
    for i in range(episodes):
        demo = rollout_expert(suite, i % 10, i // 10, seed, render=True, cfg=mock)
        for t in range(0, len(demo), every):
            ahead = slice(t, min(t + chunk, len(demo)))
            states.append({"frame": demo.stacked[t], "proprio": demo.proprio[t], "phase": demo.phases[t],
                           "instruction": demo.instruction, "task": demo.task, "episode": i, "step": t,
                           "future_frames": demo.stacked[ahead], "future_actions": demo.actions[ahead]})
    return states


def dataset_states(root: str | Path, suite: str, episodes: int, every: int, chunk: int) -> list[dict]:
    """States of a collected dataset's episodes of `suite` instead (e.g. the demonstrations the scripted
    expert made inside real LIBERO, `vam-stack collect --robot libero-real`): `episodes` of them spread
    evenly over the dataset's order (so over its tasks), every `every`-th step, with the phase labels,
    frames and actions the expert recorded. A model trained on the dataset has seen these states."""
    from vam_data.dataset import Dataset

    data = Dataset(root, suites=[suite])
    if episodes > len(data.episodes):
        raise SystemExit(f"--episodes {episodes}: {root} holds only {len(data.episodes)} episodes of {suite!r}")
    picks = np.linspace(0, len(data.episodes) - 1, episodes).round().astype(int)
    states = []
    for i, e in enumerate(picks):
        ep = data.episodes[e]
        frames = ep.decode_all()                                                    # [T, H, W, 3]
        for t in range(0, len(ep), every):
            ahead = slice(t, min(t + chunk, len(ep)))
            states.append({"frame": frames[t], "proprio": ep.proprio[t], "phase": PHASES[int(ep.phase[t])],
                           "instruction": ep.meta["instruction"], "task": ep.meta["task"], "episode": i, "step": t,
                           "future_frames": frames[ahead], "future_actions": ep.actions[ahead]})
    return states


def _donors(states: list[dict], seed: int = 0) -> list[int]:
    """For each state, a state of another episode (fixed draw): whose features are swapped in."""
    rng = np.random.default_rng(seed)
    episodes = np.array([s["episode"] for s in states])
    return [int(rng.choice(np.flatnonzero(episodes != e))) for e in episodes]


def _decode(policy, feats, sigma_v: float, state, noise_action):
    """Actions (normalised) [A, D] and the step-0 (TR, mass on V0, mass on V+) decoded by the head from
    the given features."""
    import torch

    from vam_model.networks.action_sampler import euler_integrate
    from vam_model.networks.head_io import HeadCache, prefix_kv

    m = policy.model
    sig = torch.full((1,), sigma_v)
    cache = HeadCache(*prefix_kv(m.head, m.cfg.dit_grid, feats, sig, state))     # [layers, 1, 1, Lp, hd]
    trs = []

    def velocity(x, sigma, step):
        out = m.denoise_step(cache, x, sigma)                                   # velocity [1, A, D]
        trs.append((float(out.tr()[0]), float(out.mass_v0[0]), float(out.mass_vplus[0])))
        return out.velocity

    actions = euler_integrate(velocity, noise_action, policy.cfg.euler_steps)    # [1, A, D]
    return actions[0].numpy(), trs[0]


def measure(policy, states: list[dict], progress: bool = True, index: int | None = None) -> list[dict]:
    """Every state's TR, covariates and swap sensitivities (rows in state order), with the features
    extracted at solver grid index `index` (None: the policy's)."""
    import torch

    from vam_stack.views import fit_views
    from vam_stack.progress import progress_bar

    r, m = policy.mcfg.robot, policy.model
    a_mean, a_std = policy.stats["action"]
    p_mean, p_std = policy.stats["proprio"]
    views = len(r.cameras)
    prepared = []
    with torch.no_grad():
        for k, s in enumerate(progress_bar(states, desc="features", unit="state", disable=not progress)):
            policy.reset(s["instruction"])
            frame = fit_views(s["frame"], views, r.camera_width, r.camera_height)     # the camera path's rule
            policy.generator.manual_seed(1000 + k)                                      # the TR study's noise
            noise = policy._noise(None)
            anchor = m.encode_frames(torch.from_numpy(frame)[None, None]).float()      # [1, 16, 1, h, w]
            feats, sigma_v = m.video_features(anchor, policy._text, noise["video"], index)  # [1, T, N, D]
            state = torch.from_numpy(((s["proprio"] - p_mean) / p_std).astype(np.float32))[None]  # [1, P]
            prepared.append((feats, sigma_v, state, noise["action"], frame))
        rows = []
        donors = _donors(states)
        for k, s in enumerate(progress_bar(states, desc="swaps", unit="state", disable=not progress)):
            feats, sigma_v, state, a_noise, frame = prepared[k]
            donor = prepared[donors[k]][0]
            base, (tr, m0, mp) = _decode(policy, feats, sigma_v, state, a_noise)      # [A, D]
            fut = torch.cat([feats[:, :1], donor[:, 1:]], dim=1)                        # V+ from the donor
            cur = torch.cat([donor[:, :1], feats[:, 1:]], dim=1)                        # V0 from the donor
            sf = float(np.abs(_decode(policy, fut, sigma_v, state, a_noise)[0] - base).mean())
            sc = float(np.abs(_decode(policy, cur, sigma_v, state, a_noise)[0] - base).mean())
            gap_f = float((feats[:, 1:] - donor[:, 1:]).norm() / feats[:, 1:].norm())
            gap_c = float((feats[:, :1] - donor[:, :1]).norm() / feats[:, :1].norm())
            ahead = np.stack([fit_views(f, views, r.camera_width, r.camera_height) for f in s["future_frames"]])
            acts = (s["future_actions"] - a_mean) / a_std                               # [<=A, D] normalised
            grip = np.sign(s["future_actions"][:, -1])
            rows.append({"state": k, "episode": s["episode"], "task": s["task"], "step": s["step"],
                         "phase": s["phase"], "tr": tr, "mass_v0": m0, "mass_vplus": mp, "donor": donors[k],
                         "scene_change": float(np.abs(ahead.astype(np.float32) - frame[None]).mean() / 255.0),
                         "action_change": float(np.abs(acts - acts[:1]).mean()),
                         "gripper_event": float(bool((grip != grip[0]).any())),
                         "swap_future": sf, "swap_current": sc, "future_share": sf / (sf + sc + 1e-12),
                         "future_gap": gap_f, "current_gap": gap_c})
    return rows


# ---- statistics -----------------------------------------------------------------------------------
def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (so a binary covariate gives a proper rank correlation)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    _, inv = np.unique(x, return_inverse=True)
    sums = np.bincount(inv, weights=ranks)
    return sums[inv] / np.bincount(inv)[inv]


def spearman(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(_ranks(x), _ranks(y))[0, 1])


def _bootstrap(rows: list[dict], stat, n: int = 1000, seed: int = 0) -> dict:
    """stat(rows) with a 95 % interval from resampling whole episodes."""
    by_ep: dict[int, list[dict]] = {}
    for row in rows:
        by_ep.setdefault(row["episode"], []).append(row)
    eps = list(by_ep)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n):
        pick = rng.choice(len(eps), size=len(eps))
        v = stat([row for i in pick for row in by_ep[eps[i]]])
        if np.isfinite(v):
            draws.append(v)
    lo, hi = (np.percentile(draws, [2.5, 97.5]) if draws else (float("nan"), float("nan")))
    return {"value": stat(rows), "ci95": [float(lo), float(hi)], "n": len(rows), "episodes": len(eps)}


def summarise(rows: list[dict]) -> dict:
    phases = {ph: [r for r in rows if r["phase"] == ph] for ph in PHASES}
    by_phase = {ph: {q: _bootstrap(sel, lambda rs, q=q: float(np.mean([r[q] for r in rs])) if rs else float("nan"))
                     for q in ("tr",) + MASSES + COVARIATES + GAPS} for ph, sel in phases.items() if sel}
    corr = {}
    for q in COVARIATES:
        def rho(rs, q=q):
            return spearman([r[q] for r in rs], [r["tr"] for r in rs])
        corr[q] = {"all": _bootstrap(rows, rho), **{ph: _bootstrap(sel, rho) for ph, sel in phases.items() if sel}}
    return {"by_phase": by_phase, "spearman_tr": corr}


def table(summary: dict) -> str:
    def cell(s):
        return f"{s['value']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]"

    bp, sp = summary["by_phase"], summary["spearman_tr"]
    lines = [f"{'quantity':<15} " + " ".join(f"{ph:<26}" for ph in bp) + " Spearman with TR: all / within phases"]
    for q in ("tr",) + MASSES + COVARIATES + GAPS:
        corr = "" if q not in sp else " / ".join(f"{sp[q][k]['value']:+.2f}" for k in ("all",) + tuple(bp))
        lines.append(f"{q:<15} " + " ".join(f"{cell(bp[ph][q]):<26}" for ph in bp) + f" {corr}")
    return "\n".join(lines)


def plot(rows: list[dict], summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"planning": "tab:blue", "manipulation": "tab:orange"}
    panels = (("scene_change", "scene change ahead (mean |pixel change|, 0-1)"),
              ("action_change", "expert's action change ahead (normalised)"),
              ("swap_current", "chunk change when V0 is swapped (normalised)"))
    fig, ax = plt.subplots(1, 4, figsize=(18, 4))
    sp = summary["spearman_tr"]
    for a, (q, label) in zip(ax, panels):
        for ph, c in colors.items():
            sel = [r for r in rows if r["phase"] == ph]
            a.scatter([r[q] for r in sel], [r["tr"] for r in sel], s=8, color=c, alpha=0.6, label=ph)
        a.set_xlabel(label)
        a.set_ylabel("TR")
        a.set_title(f"Spearman with TR {sp[q]['all']['value']:+.2f} (within phases "
                    + ", ".join(f"{sp[q][ph]['value']:+.2f}" for ph in colors if ph in sp[q]) + ")", fontsize=9)
        a.legend()
    bp = summary["by_phase"]
    x = np.arange(2)
    for i, ph in enumerate(p for p in colors if p in bp):
        qs = ("swap_current", "swap_future")
        vals = [bp[ph][q]["value"] for q in qs]
        err = np.array([[bp[ph][q]["value"] - bp[ph][q]["ci95"][0], bp[ph][q]["ci95"][1] - bp[ph][q]["value"]]
                        for q in qs]).T
        bars = ax[3].bar(x + (i - 0.5) * 0.38, vals, 0.38, yerr=err, capsize=3, color=colors[ph], label=ph)
        ax[3].bar_label(bars, fmt="%.3f", fontsize=8)
    ax[3].set_xticks(x, ["V0 (current) swapped", "V+ (future) swapped"])
    ax[3].set_ylabel("change of the decoded chunk (normalised)")
    ax[3].set_title("what the head reads (95 % bootstrap over episodes)", fontsize=9)
    ax[3].legend()
    return save_figure(fig, path)


def add_arguments(p: argparse.ArgumentParser) -> None:
    state_arguments(p, episodes=20)
    p.add_argument("--index", type=int, help="solver grid index to extract the features at (default: the "
                                             "policy's; the last is the least noisy future)")
    p.add_argument("--dataset", default=None, help="read the states from this collected dataset's episodes of "
                   "--suite (e.g. real LIBERO demonstrations) instead of the mock's held-out expert rollouts")


def run(args: argparse.Namespace) -> int:
    from vam_model.policy import build_policy
    from vam_stack.outputs import claim_out_dir

    if args.episodes < 2 or args.every < 1:         # a donor must come from another episode
        raise SystemExit(f"--episodes must be >= 2 and --every >= 1, got {args.episodes}, {args.every}")
    if not Path(args.checkpoint).is_file():
        raise SystemExit(f"--checkpoint {args.checkpoint!r} is not a file")
    claim_out_dir(args.out, args.overwrite)          # before minutes of work, not after
    policy = build_policy(checkpoint=args.checkpoint, guidance="none", seed=0)
    steps = policy.mcfg.solver.steps
    index = policy.mcfg.solver.feature_index if args.index is None else args.index
    if not 0 <= index < steps:
        raise SystemExit(f"--index {index} outside the solver grid [0, {steps - 1}]")
    chunk = policy.mcfg.robot.chunk
    states = (collect_states(args.suite, args.episodes, args.seed, args.every, chunk) if args.dataset is None
              else dataset_states(args.dataset, args.suite, args.episodes, args.every, chunk))
    rows = measure(policy, states, index=index)
    summary = summarise(rows) | {"checkpoint": args.checkpoint, "suite": args.suite, "seed": args.seed,
                                 "states": len(states), "feature_block": policy.mcfg.dit.feature_block,
                                 "feature_index": index, "dataset": args.dataset}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tr_phase.json").write_text(json.dumps(summary | {"rows": rows}, indent=1) + "\n")
    png = plot(rows, summary, out / "tr_phase.png")
    print(table(summary))
    print(f"wrote {out / 'tr_phase.json'} and {png}")
    return 0

