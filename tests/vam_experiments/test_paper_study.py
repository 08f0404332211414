"""The paper study's driver and summary: stages skipped or resumed, cells checked against their
weights, the statistics and the verdicts on the paper's four claims."""
import json
from pathlib import Path

import pytest

from vam_experiments.paper_study import (DONE, Study, StudyConfig, StudyModel, diff_interval, load_study_config,
                                         pool, verdict)
from vam_stack.config import ConfigError

LABELS = ("none", "flat", "tr_adaptive", "tr_adaptive+running_min")


@pytest.mark.unit
def test_diff_interval_is_newcombes_hybrid_score_interval():
    d, lo, hi = diff_interval(56, 70, 48, 80)        # Newcombe (1998), example (a): 0.0524 to 0.3339
    assert d == pytest.approx(0.2)
    assert lo == pytest.approx(0.0524, abs=1e-4) and hi == pytest.approx(0.3339, abs=1e-4)
    d, lo, hi = diff_interval(0, 100, 0, 100)
    assert d == 0 and lo < 0 < hi


@pytest.mark.unit
def test_verdicts_need_the_interval_on_one_side_of_zero():
    assert verdict(0.01, 0.3, +1) == "confirmed" and verdict(-0.3, -0.01, +1) == "refuted"
    assert verdict(-0.3, -0.01, -1) == "confirmed" and verdict(0.01, 0.3, -1) == "refuted"
    assert verdict(-0.1, 0.2, +1) == verdict(-0.1, 0.2, -1) == "not resolvable at this n"


def _episodes(label, suite, k, n, guided=0):
    return [{"guidance": label, "suite": suite, "seed": i % 2, "task": (i // 2) % 10, "episode": i // 20,
             "success": i < k, "steps": 50, "termination": "success" if i < k else "timeout",
             "tr_summary": {"replans": 10, "guided_replans": guided, "tr_mean": 0.8, "tr_mean_planning": 0.6,
                            "tr_mean_manipulation": 1.0}} for i in range(n)]


def _write_results(path: Path, episodes: list, digest: str | None, complete: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"complete": complete, "weights": {"tensor_sha256": digest} if digest else None,
                                "episodes": episodes}))
    return path


def _write_tr(path: Path, mean: float) -> None:
    rows = [{"index": 2, "phase": "planning" if i % 2 else "manipulation", "tr": mean + 0.01 * (i % 5)}
            for i in range(60)]
    path.mkdir(parents=True, exist_ok=True)
    (path / "tr_study.json").write_text(json.dumps({"default_index": 2, "rows": rows}))


@pytest.fixture
def ckpts(tmp_path, micro_cfg, micro_model):
    from vam_model.networks.checkpoint import save_checkpoint, verify_checkpoint

    out = {}
    for name in ("scratch", "lora", "full"):
        p = save_checkpoint(tmp_path / "models" / f"{name}.safetensors", micro_model, micro_cfg)
        out[name] = (str(p), verify_checkpoint(p))
    return out


def _study(tmp_path, ckpts, **kw) -> StudyConfig:
    models = tuple(StudyModel(n, f"row {n}", ckpts[n][0]) for n in ("scratch", "lora", "full"))
    return StudyConfig(root=str(tmp_path / "study"), data_root=str(tmp_path / "study"),
                       summary_out=str(tmp_path / "docs"), guidance=LABELS,
                       models=models, **kw)


# (model, suite, label) -> successes of 100: LoRA beats full OOD; flat costs ID on LoRA; tr_adaptive +12 OOD
RATES = {("lora", "goal_ood", "none"): 50, ("full", "goal_ood", "none"): 20, ("lora", "goal", "flat"): 70,
         ("lora", "goal_ood", "tr_adaptive"): 62}


def _fill(cfg: StudyConfig, ckpts, skip=()):
    study = Study(cfg, log=lambda *a: None)
    for m in cfg.models:
        for suite in ("goal", "goal_ood"):
            for g in LABELS:
                if (m.name, suite, g) in skip:
                    continue
                k = RATES.get((m.name, suite, g), 90 if suite == "goal" else 20)
                guided = 6 if g.startswith("tr_adaptive") else 0
                _write_results(study.cell_dir(m.name, suite, g) / "results.json",
                               _episodes(g, suite, k, 100, guided), ckpts[m.name][1])
        for suite, mean in (("goal", 0.8), ("goal_ood", 0.9)):
            _write_tr(Path(cfg.data_root) / "tr_study" / m.name / suite, mean + (0.4 if m.name == "lora" else 0.0))
    return study


@pytest.mark.unit
def test_the_summary_gives_the_table_the_s_fraction_tr_and_the_four_verdicts(tmp_path, ckpts):
    cfg = _study(tmp_path, ckpts)
    summary = _fill(cfg, ckpts).write_summary()
    c = summary["claims"]
    assert c["lora_beats_full_ood"]["verdict"] == "confirmed"           # 50 vs 20 of 100
    assert c["tr_higher_with_lora"]["verdict"] == "confirmed"           # +0.4 TR
    assert c["flat_costs_id"]["verdict"] == "confirmed"                 # 70 vs 90
    # +12 points at n 100: the synthetic cells nest (the same first episodes succeed under both arms), so
    # all 12 discordant episodes favour tr_adaptive; unpaired that is not resolvable, paired it is
    ev = c["tr_adaptive_helps_ood_keeps_id"]["evidence"]["tr_adaptive_vs_none_ood"]
    assert ev["unpaired_ci95"][0] < 0 < ev["ci95"][0] and ev["paired"]["a_only"] == 12 and ev["paired"]["b_only"] == 0
    assert c["tr_adaptive_helps_ood_keeps_id"]["verdict"] == "confirmed"
    assert summary["guidance_by_model"]["full"]["flat_verdict"] == "not resolvable at this n"
    assert summary["ship_lora"]["ship"] is True                          # ID 90 %, OOD 50 vs 20
    cell = summary["cells"]["lora"]["goal_ood"]["tr_adaptive"]
    assert cell["successes"] == 62 and cell["episodes"] == 100 and cell["s_positive_fraction"] == pytest.approx(0.6)
    assert cell["episodes_s_positive"] == 100
    out = Path(cfg.summary_out)
    table = (out / "paper_study_table.md").read_text()
    assert "62 % (62/100)" in table and "tr_adaptive+running_min OOD" in table and "**confirmed**" in table
    assert "paired on 100 episodes (12 vs 0 discordant" in table
    assert "**ship it**" in table
    assert (out / "paper_study.png").stat().st_size > 10_000
    assert json.loads((out / "paper_study.json").read_text())["config"]["episodes_per_cell"] == 100


@pytest.mark.unit
def test_cells_from_other_weights_or_counted_twice_are_refused_and_gaps_are_named(tmp_path, ckpts):
    cfg = _study(tmp_path, ckpts)
    study = _fill(cfg, ckpts, skip={("full", "goal", "flat")})
    logs = []
    study.log = logs.append
    assert study.write_summary() is None and "full/goal/flat" in logs[-1]
    part = study.write_summary(partial=True)                              # what finished, the rest pending
    assert part["complete"] is False and part["guidance_by_model"]["full"]["flat_verdict"].startswith("pending")
    assert part["claims"]["lora_beats_full_ood"]["verdict"] == "confirmed"
    table = (Path(cfg.summary_out) / "paper_study_table.md").read_text()
    assert table.startswith("**Partial:**")
    assert part["ship_lora"]["ship"] is None and part["ship_lora"]["met_by_finished_cells"] is True
    assert "**pending** until the study is complete (the cells finished so far meet it)" in table
    assert "ship it" not in table                                         # no default chosen from a partial table
    running = study.cell_dir("full", "goal", "flat") / "results.json"     # a cell still running: shown, marked
    _write_results(running, _episodes("flat", "goal", 20, 30), ckpts["full"][1], complete=False)
    study.write_summary(partial=True)
    assert any(m.startswith("replacing the earlier summary in") for m in logs)   # refreshed, never silently
    assert "(unfinished: 30 of 100)" in (Path(cfg.summary_out) / "paper_study_table.md").read_text()
    stale = study.cell_dir("full", "goal", "flat") / "results.json"
    _write_results(stale, _episodes("flat", "goal", 90, 100), "0" * 64)
    with pytest.raises(ValueError, match="the model changed"):
        study.write_summary()
    a = _write_results(tmp_path / "a.json", _episodes("none", "goal", 5, 10), None)
    with pytest.raises(ValueError, match="already counted"):
        pool([a, a])


@pytest.mark.unit
def test_finished_stages_are_skipped_stopped_ones_resumed_and_partial_cells_kept(tmp_path, ckpts, monkeypatch):
    from vam_experiments.paper_study import DataStage, PretrainStage

    root = tmp_path / "study"
    ds = tmp_path / "demos"
    (ds / "meta").mkdir(parents=True)
    (ds / "meta" / "info.json").write_text("{}")                        # the ID demonstrations exist
    run_dir = tmp_path / "runs" / "lora"
    run_dir.mkdir(parents=True)
    (run_dir / "train_state.pt").write_bytes(b"")                        # a stopped fine-tune
    models = (StudyModel("scratch", "s", ckpts["scratch"][0],
                         reuse=(str(_write_results(tmp_path / "old" / "results.json",
                                                   _episodes("none", "goal", 90, 100), None)),)),
              StudyModel("lora", "l", str(tmp_path / "models" / "new_lora.safetensors"), train="lora.yaml",
                         run=str(run_dir)),
              StudyModel("full", "f", ckpts["full"][0]))
    cfg = StudyConfig(root=str(root), data_root=str(tmp_path / "cells"), guidance=LABELS, models=models,
                      pretrain=PretrainStage(collect=("--suites", "goal_video"), dataset=str(tmp_path / "video"),
                                             config="pre.yaml", ship=str(tmp_path / "foundation.safetensors")),
                      id_demos=DataStage(collect=("--suites", "goal"), dataset=str(ds)))
    study = Study(cfg, log=lambda *a: None)
    partial = study.cell_dir("full", "goal", "none")
    _write_results(partial / "results.json", _episodes("none", "goal", 3, 4), ckpts["full"][1], complete=False)
    _write_results(study.cell_dir("full", "goal", "flat") / "results.json", _episodes("flat", "goal", 9, 100),
                   ckpts["full"][1])
    calls = []

    def fake_vam(self, name, args, threads=None):                       # records; a collect leaves its dataset
        calls.append((name, args))
        if args[0] == "collect":
            info = Path(args[args.index("--out") + 1]) / "meta" / "info.json"
            info.parent.mkdir(parents=True)
            info.write_text("{}")

    monkeypatch.setattr(Study, "_vam", fake_vam)
    study.run()
    names = [n for n, _ in calls]
    assert "collect_pretrain" in names and "collect_id" not in names
    assert ("pretrain", ["train", "--config", "pre.yaml", "--out", str(root / "foundation"), "--ship",
                         str(tmp_path / "foundation.safetensors")]) in calls
    lora = dict(calls)["train_lora"]
    assert "--resume" in lora and lora[-2:] == ["--ship", str(tmp_path / "models" / "new_lora.safetensors")]
    assert (run_dir / DONE).is_file() and (root / "foundation" / DONE).is_file()
    evals = {n for n in names if n.startswith("eval_")}
    assert "eval_scratch_goal_none" not in evals and "eval_scratch_goal_flat" in evals   # reused episodes count
    assert "eval_full_goal_flat" not in evals and "eval_full_goal_none" in evals          # complete vs partial
    assert len(evals) == 3 * 2 * 4 - 2
    kept = [p for p in partial.parent.iterdir() if p.name.startswith("none.partial-")]
    assert len(kept) == 1 and (kept[0] / "results.json").is_file()      # moved aside, not deleted
    assert sum(n.startswith("tr_study_") for n in names) == 6
    calls.clear()
    Study(cfg, log=lambda *a: None).run()
    assert not any(n.startswith(("collect_", "pretrain", "train_")) for n, _ in calls)   # done-markers hold
    calls.clear()
    for p in study.cell_dir("lora", "goal", "none").parent.parent.rglob("results.json"):
        p.unlink()
    Study(cfg, log=lambda *a: None, stages=("eval",), models=("lora",)).run()
    assert calls and all(n.startswith("eval_lora_") for n, _ in calls)      # one stage, one model
    with pytest.raises(ConfigError, match="'evaluate'"):
        Study(cfg, stages=("evaluate",))
    with pytest.raises(ConfigError, match="'dora'"):
        Study(cfg, models=("dora",))
    with pytest.raises(ConfigError, match="'cfg'"):
        Study(cfg, labels=("cfg",))


@pytest.mark.unit
def test_labels_select_cells_and_ablations_run_after_the_papers_schedules(tmp_path, ckpts):
    cfg = _study(tmp_path, ckpts)
    todo = [(m.name, s, g) for m, s, g in Study(cfg).pending_cells()]
    assert len(todo) == 3 * 2 * 4
    first_ablation = next(i for i, job in enumerate(todo) if job[2] == "tr_adaptive+running_min")
    assert first_ablation == 3 * 2 * 3 and all(j[2] == "tr_adaptive+running_min" for j in todo[first_ablation:])
    assert todo[:3] == [("scratch", "goal", "none"), ("scratch", "goal", "flat"), ("scratch", "goal", "tr_adaptive")]
    only = Study(cfg, models=("full",), labels=("none", "flat")).pending_cells()
    assert [(m.name, s, g) for m, s, g in only] == [("full", s, g) for s in ("goal", "goal_ood") for g in ("none", "flat")]


@pytest.mark.unit
def test_a_sigterm_to_the_driver_stops_its_running_evaluations_and_starts_no_more(tmp_path, ckpts, monkeypatch,
                                                                                   capsys):
    import argparse
    import os
    import signal
    import sys
    import threading
    import time

    import yaml

    from vam_experiments.paper_study import run

    cells = tmp_path / "cells"
    study_yaml = tmp_path / "study.yaml"
    study_yaml.write_text(yaml.safe_dump({"study": {
        "root": str(tmp_path / "study"), "data_root": str(cells), "summary_out": str(tmp_path / "docs"),
        "guidance": list(LABELS), "eval_workers": 2,
        "models": [{"name": n, "label": n, "checkpoint": ckpts[n][0]} for n in ("scratch", "lora", "full")]}}))
    child = ("import os, pathlib, sys, time; d = pathlib.Path(sys.argv[-1]); d.mkdir(parents=True); "
             "(d / 'started').write_text(str(os.getpid())); time.sleep(120)")       # argv[-1]: the cell's --out
    seen = []

    def command(self):
        seen.append(self)
        return [sys.executable, "-c", child]

    monkeypatch.setattr(Study, "_command", command)
    children = []

    def stop_when_both_run():
        deadline = time.monotonic() + 60
        while len(list(cells.rglob("started"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)                                            # both children up and running
        children.extend(seen[0]._children)
        os.kill(os.getpid(), signal.SIGTERM)

    args = argparse.Namespace(config=str(study_yaml), dry_run=False, summary_only=False, partial=False,
                              stages="eval", models="lora", labels=None)   # 8 cells, 2 at a time
    old = signal.getsignal(signal.SIGTERM)
    try:
        threading.Thread(target=stop_when_both_run, daemon=True).start()
        t0 = time.monotonic()
        assert run(args) == 130
    finally:
        signal.signal(signal.SIGTERM, old)
    assert "interrupted (signal 15)" in capsys.readouterr().err
    assert len(children) == 2 and all(p.poll() is not None for p in children)   # both stopped, not left running
    assert time.monotonic() - t0 < 60
    time.sleep(0.5)
    assert len(list(cells.rglob("started"))) == 2                        # no queued cell started after the signal


@pytest.mark.unit
def test_the_shipped_study_config_loads_and_bad_values_are_refused(tmp_path):
    from vam_stack.paths import config_dir

    cfg = load_study_config(Path(config_dir()) / "study" / "paper_study.yaml")
    assert [m.name for m in cfg.models] == ["scratch", "lora", "full"] and cfg.cell_episodes == 100
    assert cfg.guidance[:3] == ("none", "flat", "tr_adaptive")
    with pytest.raises(ConfigError, match="'tr_adaptive\\+median'"):
        StudyConfig(guidance=("none", "flat", "tr_adaptive", "tr_adaptive+median"), models=cfg.models)
    with pytest.raises(ConfigError, match="must include 'flat'"):
        StudyConfig(guidance=("none", "tr_adaptive"), models=cfg.models)
    with pytest.raises(ConfigError, match="scratch, lora and full"):
        StudyConfig(models=cfg.models[:2])
    with pytest.raises(ConfigError, match="train and run go together"):
        StudyModel("lora", "l", "x.safetensors", train="t.yaml")
    from vam_train.train import load_train_config

    for name in ("pretrain_goal_video64", "finetune_lora64", "finetune_full64"):
        load_train_config(Path(config_dir()) / "study" / f"{name}.yaml", {})
