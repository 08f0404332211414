"""The paper's finding at small scale: a video prior, LoRA vs full fine-tuning, TR-adaptive OOD.

    vam-stack paper-study --config config/study/paper_study.yaml              # every stage
    vam-stack paper-study --config config/study/paper_study.yaml --dry-run    # what would run
    vam-stack paper-study --config config/study/paper_study.yaml --summary-only

Stages, each skipped when its output is already there (so a stopped study resumes, and
nothing finished is ever replaced):
  1. the video-pretraining set (`collect --suites goal_video`) and the ID goal demonstrations;
  2. the foundation checkpoint (`train`, mode video), shipped to its `ship` path;
  3. one fine-tune per model with a `train` config, shipped to the model's checkpoint path (a
     run directory without the study's done-marker is resumed with --resume; a checkpoint
     already there without its run directory is taken as given);
  4. evaluation cells, one `vam-stack eval` process per (model, suite, guidance label), run
     `eval_workers` at a time; a cell is done when its results.json is complete and its
     weights hash is the model's (a partial cell is moved aside, never deleted); episodes a
     model's `reuse` list already holds (earlier evaluations of the same weights) count;
  5. the TR study per model on goal and goal_ood expert states;
  6. the summary: the ID/OOD table with 95 % Wilson intervals, how often s_i > 0, TR by
     expert phase, TR against OOD success, and a verdict on each of the paper's four claims.

Verdicts compare two success rates by Newcombe's hybrid-score interval of their difference
(independent samples: conservative here, since every cell runs the same initial states):
"confirmed" when the interval lies on the claimed side of 0, "refuted" when it lies on the
other, else "not resolvable at this n".
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from vam_stack.config import ConfigError, check, from_dict, load_yaml
from vam_stack.names import GUIDANCE_LABELS, GUIDANCE_SCHEDULES

from .study_report import markdown, plot, summarise
from .study_stats import ID_SUITE, OOD_SUITE, cell_stats, diff_interval, pool, tr_stats, verdict

DONE = "study_done.json"                   # written into a run directory when its stage finished


@dataclass(frozen=True)
class DataStage:
    collect: tuple[str, ...]               # `vam-stack collect` arguments (without --out)
    dataset: str                           # the dataset directory it writes


@dataclass(frozen=True)
class PretrainStage(DataStage):
    config: str = ""                       # train YAML of the foundation run (mode video)
    ship: str = ""                         # where the foundation checkpoint goes (the fine-tunes' init_from)


@dataclass(frozen=True)
class StudyModel:
    name: str                              # short name: directories and JSON keys
    label: str                             # the table's row label
    checkpoint: str                        # the weights every cell of this row evaluates (a fine-tune ships them here)
    train: str | None = None               # train YAML that makes `checkpoint` (None: given, e.g. the shipped model)
    run: str | None = None                 # the fine-tune's run directory (with `train`)
    reuse: tuple[str, ...] = ()            # earlier results.json of these same weights whose episodes count

    def __post_init__(self):
        check(self.name.isidentifier(), f"study model name must be an identifier, got {self.name!r}")
        check((self.train is None) == (self.run is None),
              f"study model {self.name!r}: train and run go together, got train={self.train!r}, run={self.run!r}")


@dataclass(frozen=True)
class StudyConfig:
    root: str = "runs/study"               # run directories and logs (large, not committed)
    data_root: str = "docs/data/paper_study"  # evaluation cells and TR studies (small: committed, so a study
                                           # resumes on a fresh clone without re-running what finished)
    summary_out: str = "runs/study/summary"  # the summary's JSON, markdown table and figure (the published copy in
                                           # docs/paper_study/ is copied there by hand, never written by a run)
    seeds: tuple[int, ...] = (0, 1)        # reporting seeds of every cell (fixed before the study)
    episodes_per_task: int = 5             # per task per seed
    guidance: tuple[str, ...] = GUIDANCE_SCHEDULES  # labels (vam_stack.names.GUIDANCE_LABELS)
    eval_workers: int = 2                  # evaluation processes side by side (one thread each)
    tr_study_episodes: int = 20            # expert episodes per suite of the TR study
    pretrain: PretrainStage | None = None  # the pretraining set and the foundation run
    id_demos: DataStage | None = None      # the ID demonstrations the fine-tunes train on
    models: tuple[StudyModel, ...] = field(default_factory=tuple)  # the table's rows, in order

    def __post_init__(self):
        for g in self.guidance:
            check(g in GUIDANCE_LABELS, f"study.guidance: unknown label {g!r}; expected from {list(GUIDANCE_LABELS)}")
        for need in GUIDANCE_SCHEDULES:
            check(need in self.guidance, f"study.guidance must include {need!r} (the paper's claims need it), "
                                         f"got {list(self.guidance)}")
        check(len(self.seeds) >= 1 and all(s >= 0 for s in self.seeds), f"study.seeds: got {self.seeds!r}")
        check(self.episodes_per_task >= 1, f"study.episodes_per_task must be >= 1, got {self.episodes_per_task!r}")
        check(1 <= self.eval_workers <= 16, f"study.eval_workers must be in [1, 16], got {self.eval_workers!r}")
        check(self.tr_study_episodes >= 1, f"study.tr_study_episodes must be >= 1, got {self.tr_study_episodes!r}")
        names = [m.name for m in self.models]
        check(len(names) == len(set(names)) and {"scratch", "lora", "full"} <= set(names),
              f"study.models needs unique names including scratch, lora and full, got {names}")

    @property
    def cell_episodes(self) -> int:
        """Episodes of one (model, suite, guidance) cell."""
        return 10 * self.episodes_per_task * len(self.seeds)


def load_study_config(path: str | Path) -> StudyConfig:
    data = load_yaml(path)
    if "study" not in data:
        raise ConfigError(f"{path}: missing section 'study' (sections: {sorted(data)})")
    return from_dict(StudyConfig, data["study"], f"{path} [study]")




# ---- the stages -------------------------------------------------------------------------------
STAGES = ("data", "train", "eval", "tr_study")


def _stop(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """Terminate a child still running, then kill it if it has not exited after `grace_s`."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Study:
    def __init__(self, cfg: StudyConfig, dry_run: bool = False, log=print, stages: tuple[str, ...] = STAGES,
                 models: tuple[str, ...] | None = None, labels: tuple[str, ...] | None = None):
        """`stages`, `models` and `labels` (guidance labels of the evaluation cells) restrict what
        `run` does (default: every stage, every model, every label of the config)."""
        bad = ([x for x in stages if x not in STAGES] + [m for m in models or () if m not in [x.name for x in cfg.models]]
               + [g for g in labels or () if g not in cfg.guidance])
        if bad:
            raise ConfigError(f"paper-study: unknown stage, model or label {bad[0]!r}; stages {list(STAGES)}, "
                              f"models {[m.name for m in cfg.models]}, labels {list(cfg.guidance)}")
        self.cfg, self.dry_run, self.log = cfg, dry_run, log
        self.stages, self.only = tuple(stages), set(models or [m.name for m in cfg.models])
        self.labels = tuple(labels or cfg.guidance)
        self._children: set[subprocess.Popen] = set()   # running `vam-stack` processes (stopped with the driver)
        self._stopping = False                  # set when interrupted: no new process starts
        self._lock = threading.Lock()           # guards the two above between evaluation workers
        self.root = Path(cfg.root)
        self.data_root = Path(cfg.data_root)
        self.ran: list[str] = []                 # stage names run (or, dry, that would run)

    # subprocesses of the `vam-stack` command, logged into ROOT/logs/
    def _command(self) -> list[str]:
        exe = Path(sys.executable).with_name("vam-stack")
        return [str(exe)] if exe.is_file() else [sys.executable, "-c", "from vam_cli.main import entry; entry()"]

    def _vam(self, name: str, args: list[str], threads: int | None = None) -> None:
        cmd = self._command()
        self.ran.append(name)
        if self.dry_run:
            self.log(f"[dry run] {name}: vam-stack {' '.join(args)}")
            return
        logs = self.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ) | ({"OMP_NUM_THREADS": str(threads)} if threads else {})
        t0 = time.monotonic()
        self.log(f"{name}: vam-stack {' '.join(args)}  (log {logs / (name + '.log')})")
        with open(logs / f"{name}.log", "a") as f:
            with self._lock:
                if self._stopping:
                    raise RuntimeError(f"paper study stopping: {name!r} not started")
                proc = subprocess.Popen(cmd + args, stdout=f, stderr=subprocess.STDOUT, env=env)
                self._children.add(proc)
            try:
                rc = proc.wait()
            finally:
                self._children.discard(proc)
                _stop(proc)                     # interrupted here: the child stops too (no-op when it exited)
        if rc != 0:
            raise RuntimeError(f"paper study stage {name!r} failed (exit {rc}); see {logs / (name + '.log')}")
        self.log(f"{name}: done in {(time.monotonic() - t0) / 60:.1f} min")

    def data(self, name: str, stage: DataStage) -> None:
        if (Path(stage.dataset) / "meta" / "info.json").is_file():
            return
        self._vam(name, ["collect", *stage.collect, "--out", stage.dataset])

    def train(self, name: str, config: str, out: Path, ship: str | None = None) -> None:
        if (out / DONE).is_file() or (ship and Path(ship).is_file() and not (out / "train_state.pt").is_file()):
            return                              # finished, or shipped weights given without their run
        args = ["train", "--config", config, "--out", str(out)]
        if (out / "train_state.pt").is_file():
            args.append("--resume")             # a stopped run continues where it was
        if ship:
            args += ["--ship", ship]
        self._vam(name, args)
        if not self.dry_run:
            out.mkdir(parents=True, exist_ok=True)
            (out / DONE).write_text(json.dumps({"config": config, "finished": time.time()}) + "\n")

    def cell_dir(self, model: str, suite: str, label: str) -> Path:
        return self.data_root / "eval" / model / suite / label

    def _reused(self, m: StudyModel) -> dict[tuple[str, str], list[dict]]:
        return pool([Path(p) for p in m.reuse if Path(p).is_file()])

    def _models(self) -> list[StudyModel]:
        return [m for m in self.cfg.models if m.name in self.only]

    def stop_children(self) -> None:
        """Stop every running `vam-stack` child (a signal to the driver alone must not orphan them)."""
        with self._lock:
            self._stopping = True
            running = list(self._children)
        for proc in running:
            _stop(proc)

    def pending_cells(self) -> list[tuple[StudyModel, str, str]]:
        """(model, suite, label) cells that still need their evaluation process: the paper's
        schedules of every model first, then the labelled ablations."""
        todo = []
        for m in self._models():
            reused = self._reused(m)
            for suite in (ID_SUITE, OOD_SUITE):
                for g in self.labels:
                    if len(reused.get((g, suite), [])) >= self.cfg.cell_episodes:
                        continue
                    res = self.cell_dir(m.name, suite, g) / "results.json"
                    if res.is_file() and json.loads(res.read_text()).get("complete"):
                        continue
                    todo.append((m, suite, g))
        return sorted(todo, key=lambda job: "+" in job[2])   # stable: ablation labels after the paper's

    def evaluate(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        todo = self.pending_cells()
        if not todo:
            return

        def one(job):
            m, suite, g = job
            out = self.cell_dir(m.name, suite, g)
            if out.exists() and any(out.iterdir()) and not self.dry_run:   # a stopped cell: keep it aside
                aside = out.with_name(f"{out.name}.partial-{int(time.time())}")
                out.rename(aside)
                self.log(f"moved the unfinished cell {out} to {aside}")
            self._vam(f"eval_{m.name}_{suite}_{g}",
                      ["eval", "--checkpoint", m.checkpoint, "--suites", suite, "--guidance", g,
                       "--episodes-per-task", str(self.cfg.episodes_per_task),
                       "--seeds", ",".join(map(str, self.cfg.seeds)), "--workers", "1",   # cells run side by side
                       "--out", str(out)], threads=1)

        with ThreadPoolExecutor(1 if self.dry_run else self.cfg.eval_workers) as pool_:
            try:
                list(pool_.map(one, todo))
            except KeyboardInterrupt:           # Ctrl-C or SIGTERM: no queued cell starts, the running ones stop
                self.stop_children()            # (a cell that fails lets the others finish, then raises;
                                                # run() stops children again on the way out: idempotent)
                pool_.shutdown(wait=False, cancel_futures=True)
                raise

    def tr_studies(self) -> None:
        for m in self._models():
            for suite in (ID_SUITE, OOD_SUITE):
                out = self.data_root / "tr_study" / m.name / suite
                if (out / "tr_study.json").is_file():
                    continue
                self._vam(f"tr_study_{m.name}_{suite}",
                          ["tr-study", "--checkpoint", m.checkpoint, "--suite", suite,
                           "--episodes", str(self.cfg.tr_study_episodes), "--every", "5", "--out", str(out)])

    def run(self) -> None:
        try:
            self._run()
        except KeyboardInterrupt:
            self.stop_children()                # Ctrl-C or SIGTERM: no child outlives the driver
            raise

    def _run(self) -> None:
        c = self.cfg
        if "data" in self.stages:
            if c.pretrain:
                self.data("collect_pretrain", c.pretrain)
            if c.id_demos:
                self.data("collect_id", c.id_demos)
        if "train" in self.stages:
            if c.pretrain:
                self.train("pretrain", c.pretrain.config, self.root / "foundation", c.pretrain.ship)
            for m in self._models():
                if m.train:
                    self.train(f"train_{m.name}", m.train, Path(m.run), m.checkpoint)
        if "eval" in self.stages:
            self.evaluate()
        if "tr_study" in self.stages:
            self.tr_studies()

    # ---- reading the finished cells -------------------------------------------------------
    def gather(self) -> tuple[dict, dict]:
        """cells[model][suite][label] and tr[model][suite] of whatever has finished."""
        from vam_model.networks.checkpoint import verify_checkpoint

        cells, tr = {}, {}
        for m in self.cfg.models:
            paths = [Path(p) for p in m.reuse if Path(p).is_file()]
            digest = verify_checkpoint(m.checkpoint) if Path(m.checkpoint).is_file() else None
            for suite in (ID_SUITE, OOD_SUITE):
                for g in self.cfg.guidance:
                    res = self.cell_dir(m.name, suite, g) / "results.json"
                    if not res.is_file():
                        continue
                    data = json.loads(res.read_text())
                    got = (data.get("weights") or {}).get("tensor_sha256")
                    if got != digest:
                        raise ValueError(f"{res} was measured on weights {got} but {m.checkpoint} has {digest}: "
                                         f"the model changed after its evaluation; move that cell aside to redo it")
                    paths.append(res)
            pooled = pool(paths)
            cells[m.name] = {s: {g: cell_stats(pooled[(g, s)]) for g in self.cfg.guidance if (g, s) in pooled}
                             for s in (ID_SUITE, OOD_SUITE)}
            tr[m.name] = {s: tr_stats(p) for s in (ID_SUITE, OOD_SUITE)
                          if (p := self.data_root / "tr_study" / m.name / s / "tr_study.json").is_file()}
        return cells, tr

    def write_summary(self, partial: bool = False) -> dict | None:
        """Write the summary when every cell has finished (with `partial`, also before: the
        finished cells, and 'pending' for every claim that lacks one)."""
        cells, tr = self.gather()
        missing = [f"{m}/{s}/{g}" for m in cells for s in (ID_SUITE, OOD_SUITE) for g in self.cfg.guidance
                   if cells[m][s].get(g, {}).get("episodes", 0) < self.cfg.cell_episodes]
        missing += [f"tr_study {m}/{s}" for m in tr for s in (ID_SUITE, OOD_SUITE) if s not in tr[m]]
        if missing:
            self.log(f"{len(missing)} cells unfinished ({', '.join(missing[:6])}{', ...' if len(missing) > 6 else ''})"
                     + ("" if partial else ": summary not written (--partial writes what has finished)"))
            if not partial:
                return None
        summary = summarise(self.cfg, cells, tr)
        out = Path(self.cfg.summary_out)
        if (out / "paper_study.json").is_file():        # derived from the cells, so refreshed, but never silently
            self.log(f"replacing the earlier summary in {out} (the cells it came from are kept)")
        out.mkdir(parents=True, exist_ok=True)
        (out / "paper_study.json").write_text(json.dumps(summary, indent=2) + "\n")
        (out / "paper_study_table.md").write_text(markdown(summary))
        plot(summary, out / "paper_study.png")
        self.log(markdown(summary))
        self.log(f"wrote {out / 'paper_study.json'}, {out / 'paper_study_table.md'}, {out / 'paper_study.png'}")
        return summary


def add_arguments(p: argparse.ArgumentParser) -> None:
    from vam_stack.paths import config_dir

    p.add_argument("--config", default=str(config_dir() / "study" / "paper_study.yaml"), help="YAML with a `study:` section")
    p.add_argument("--dry-run", action="store_true", help="print the stages that would run, run nothing")
    p.add_argument("--summary-only", action="store_true", help="only summarise the cells that have finished")
    p.add_argument("--partial", action="store_true",
                   help="write the summary before every cell has finished (unfinished claims: pending)")
    p.add_argument("--stages", default=",".join(STAGES),
                   help=f"comma-separated stages to run (default all: {','.join(STAGES)}); the summary always follows")
    p.add_argument("--models", help="comma-separated model names to train / evaluate / study (default: all)")
    p.add_argument("--labels", help="comma-separated guidance labels of the evaluation cells to run (default: the "
                                    "config's)")


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> int:
    import signal

    cfg = load_study_config(args.config)
    study = Study(cfg, dry_run=args.dry_run, stages=_names(args.stages),
                  models=_names(args.models) if args.models else None,
                  labels=_names(args.labels) if args.labels else None)
    signal.signal(signal.SIGTERM, _interrupt)   # SIGTERM stops the driver and its children like Ctrl-C
    if not args.summary_only:
        try:
            study.run()
        except KeyboardInterrupt as e:
            print(f"paper-study: interrupted ({e or 'Ctrl-C'}); its running processes were stopped. Finished "
                  f"stages and cells are kept; an unfinished cell is moved aside when the study resumes",
                  file=sys.stderr)
            return 130
    if args.dry_run:
        print(f"{len(study.ran)} stages would run")
        return 0
    return 0 if study.write_summary(partial=args.partial) is not None else 1


__all__ = ["StudyConfig", "Study", "load_study_config", "diff_interval", "verdict", "pool", "cell_stats",
           "summarise", "markdown", "add_arguments", "run"]
