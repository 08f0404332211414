"""What every simulator's closed-loop run shares: one dataclass, its checks written once.

`RunConfig` holds the policy side of a run (which policy, its weights and device, the guidance it
steers with, how the executor replans) and the outputs; each simulator adds its world in a
subclass: `vam_sim.libero_mock.runner.SimConfig` (the mocked LIBERO bridge and real LIBERO: suite,
image transport, simulated latency) and `vam_sim.yam_mujoco.runner.YamRunConfig` (the MuJoCo YAM:
task, the scripted expert's perturbations). Every check raises ConfigError quoting the bad value.

The guidance is the policy's own `vam_model.guidance.GuidanceConfig`, nested: `--w-plan` sets
`guidance.w_plan_base`, the field the policy reads. A guidance label (`vam_stack.names.GUIDANCE_LABELS`:
'flat', 'tr_adaptive+running_min', ...) is accepted in its place and read as that schedule with
the default weights; `label` gives it back, as results carry it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from numbers import Integral

from vam_control.schedule import RTC_MODES
from vam_model.guidance import GuidanceConfig, guidance_label, parse_guidance_label
from vam_stack.config import check
from vam_stack.names import GUIDANCE_SCHEDULES

from .episode import check_run_device, check_temperature

POLICIES = ("vam", "expert")  # vam: the video-action model | expert: the simulator's scripted expert
EXECUTORS = ("lockstep", "realtime")


# ---- the command line, generated from the fields --------------------------------------------------
def cli(flag: str, help: str, **kwargs) -> dict:
    """A field's command-line flag (field metadata): `flag`, its help and any further argparse keywords
    (type, choices, action, metavar; the default is the field's unless the command gives its own)."""
    return {"cli": (flag, help, kwargs)}


# --w-lang / --w-plan / --s-max set the nested GuidanceConfig's weights (None given: its defaults)
GUIDANCE_FLAGS = {"w_lang_base": ("--w-lang", "vam: language (null-text) guidance base weight (default 0.1)"),
                  "w_plan_base": ("--w-plan", "vam: plan guidance base weight (default 0.3)"),
                  "s_max": ("--s-max", "vam: upper clip of the TR-adaptive scale s_i (default 2.0)")}


@dataclass(frozen=True)
class RunConfig:
    """One closed-loop run, whatever the simulator (see the module docstring)."""

    episodes: int = field(default=1, metadata=cli("--episodes", "episodes (task i %% 10 for episode i)", type=int))
    #   episodes to run (how episode i picks its task and seed: the simulator's)
    seed: int = field(default=0, metadata=cli("--seed", "seed id hashed into every initial state", type=int))
    #   seed id hashed into every episode's initial state
    policy: str = field(default="vam", metadata=cli("--policy", None, choices=POLICIES))
    #   vam (the video-action model) | expert (the simulator's scripted expert)
    guidance: GuidanceConfig = field(default_factory=GuidanceConfig, metadata=cli("--guidance", None, choices=GUIDANCE_SCHEDULES))
    #   vam: schedule and weights (--w-lang, --w-plan, --s-max: GUIDANCE_FLAGS; a label is read as
    #   that schedule with the default weights); the expert has none, so its weights must stay the defaults
    preset: str | None = field(default=None, metadata=cli(
        "--preset", "model preset when no checkpoint is given (default libero64, the shipped simulation policy; "
                    "yam-mujoco: yam64; with --checkpoint, the checkpoint's own)"))
    #   model preset; None: the simulator's shipped policy (libero64, yam64) without a
    #   checkpoint, the checkpoint's own with one (a given preset must match it)
    checkpoint: str | None = field(default=None, metadata=cli(
        "--checkpoint", "safetensors checkpoint (default: models/<preset>.safetensors if shipped)"))
    #   vam: safetensors checkpoint; None = models/<preset>.safetensors when shipped
    record: bool = field(default=True, metadata=cli("--no-record", "do not write recording.mcap", action="store_true"))
    #   write DIR/recording.mcap
    record_image_every: int = field(default=1, metadata=cli(
        "--record-image-every", "write every k-th camera frame to the MCAP", type=int))  # 1 = all
    plots: bool = True  # write DIR/<episode>/tr_trace.png
    max_steps: int | None = field(default=None, metadata=cli(
        "--max-steps", "cap episode length below the task's limit (quick smoke runs, budgeted evaluations)", type=int))
    #   cap on episode length in ticks (smoke runs, budgeted evaluations); None = the task's limit
    execute: int | None = field(default=None, metadata=cli(
        "--execute", "replan every N steps instead of the preset's (LIBERO presets: 10, yam64: 30)", type=int))
    #   vam: actions run from each chunk before the next replan (1..chunk); None = the preset's
    executor: str = "lockstep"  # lockstep: the world waits for each replan (deterministic, how results are reported);
    #   realtime: the world runs at its own rate on the wall clock while the policy infers in a worker thread
    #   (`vam-stack sim` asks for realtime unless told: vam_sim.cli_executor)
    rtc: str = "off"  # realtime: guided = the next chunk continues the executing one (real-time chunking,
    #   vam_model/realtime_chunking.py) | trained (a head trained on a committed prefix) | off = latency compensation
    device: str = field(default="auto", metadata=cli(
        "--device", "vam: where the networks run: auto (CUDA when present), cpu, cuda or cuda:N"))
    #   vam: where the networks run (auto: CUDA when present)
    backend: str = field(default="torch", metadata=cli(
        "--backend", "vam: runtime of the DiT and head calls: torch, onnxruntime or tensorrt (the last two export "
                     "on first use, cached per weights); default onnxruntime on a CPU, torch on CUDA"))
    #   vam: runtime of the DiT and head calls (torch, onnxruntime, tensorrt)
    action_temperature: float = field(default=1.0, metadata=cli(
        "--action-temperature", "vam: scale of the flow's initial action noise, in [0, 1] (1 = the trained N(0, I) "
                                "prior; lower narrows the sampled chunks)", type=float, metavar="T"))
    #   vam: scale of the flow's initial action noise in [0, 1] (1 = the trained prior)

    def __post_init__(self) -> None:
        if isinstance(self.guidance, str):
            try:
                schedule, baseline = parse_guidance_label(self.guidance)
            except ValueError as e:
                check(False, f"guidance: {e}")
            object.__setattr__(self, "guidance", GuidanceConfig(schedule=schedule, tr_baseline=baseline))
        check(isinstance(self.guidance, GuidanceConfig),
              f"guidance must be a GuidanceConfig or a guidance label, got {self.guidance!r}")
        check(_whole(self.episodes) and self.episodes >= 1, f"episodes must be >= 1, got {self.episodes!r}")
        check(_whole(self.seed) and self.seed >= 0, f"seed must be >= 0, got {self.seed!r}")
        check(self.policy in POLICIES, f"policy must be one of {POLICIES}, got {self.policy!r}")
        check(self.policy == "vam" or self.guidance_weights == _DEFAULT_WEIGHTS,
              f"guidance weights {self.guidance_weights} steer the vam policy; the {self.policy!r} policy has none")
        check(_whole(self.record_image_every) and self.record_image_every >= 1,
              f"record_image_every must be >= 1, got {self.record_image_every!r}")
        check(self.max_steps is None or (_whole(self.max_steps) and self.max_steps >= 1),
              f"max_steps must be >= 1, got {self.max_steps!r}")
        check(self.execute is None or (_whole(self.execute) and self.execute >= 1),
              f"execute must be an int >= 1, got {self.execute!r}")
        check(self.executor in EXECUTORS, f"executor must be one of {EXECUTORS}, got {self.executor!r}")
        check(self.rtc in RTC_MODES, f"rtc must be one of {RTC_MODES}, got {self.rtc!r}")
        check(self.executor == "lockstep" or self.policy == "vam",
              f"executor {self.executor!r} runs the vam policy; the scripted expert is stepped in lockstep")
        check_run_device(self.device, self.backend, self.policy)
        check_temperature(self.action_temperature, self.policy)

    @property
    def label(self) -> str:
        """The guidance's name in results: the schedule, '+<baseline>' for an ablated TR_0."""
        return guidance_label(self.guidance)

    @property
    def guidance_weights(self) -> dict:
        """The guidance's weights as GuidanceConfig fields (what a policy built for the run is given)."""
        return {k: getattr(self.guidance, k) for k in _DEFAULT_WEIGHTS}

    def as_dict(self) -> dict:
        """Plain data for summary.json (the guidance as its fields)."""
        return asdict(self)

    def with_weights(self, w_lang: float | None = None, w_plan: float | None = None,
                     s_max: float | None = None) -> "RunConfig":
        """This config with the guidance weights that are given replaced (the command line's --w-lang,
        --w-plan, --s-max; None keeps the current), checked as usual."""
        given = {k: v for k, v in (("w_lang_base", w_lang), ("w_plan_base", w_plan), ("s_max", s_max)) if v is not None}
        return replace(self, guidance=replace(self.guidance, **given)) if given else self


def _whole(v) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


_DEFAULT_WEIGHTS = {k: getattr(GuidanceConfig(), k) for k in ("w_lang_base", "w_plan_base", "s_max")}


def _flag(cls, name: str):
    for klass in cls.__mro__:                          # a subclass that only changes a default keeps the flag
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and "cli" in f.metadata:
            return f, f.metadata["cli"]
    return None, None


def add_run_arguments(p, cls, names, defaults: dict | None = None) -> None:
    """Add the flags of `cls`'s fields `names` to parser `p` ('guidance': the schedule, 'guidance_weights':
    --w-lang/--w-plan/--s-max), each with its field's default unless `defaults` names another (the command's
    own, e.g. sim's --episodes 3)."""
    defaults = {"guidance": guidance_label(GuidanceConfig())} | (defaults or {})
    for name in names:
        if name == "guidance_weights":
            for flag, text in GUIDANCE_FLAGS.values():
                p.add_argument(flag, type=float, help=text)
            continue
        f, (flag, text, kwargs) = _flag(cls, name)
        default = defaults.get(name, f.default)
        if kwargs.get("action") == "store_true":
            p.add_argument(flag, help=text, **kwargs)
        else:
            p.add_argument(flag, default=default, help=text, **kwargs)


def run_config_from_args(cls, args, **given):
    """`cls` from the parsed flags `args` that it has a field for (an absent flag keeps the field's default;
    --no-X sets X false; --w-lang/--w-plan/--s-max the guidance weights), `given` fields winning."""
    kw = {}
    for f in fields(cls):
        _, meta = _flag(cls, f.name)
        if f.name in given or meta is None:
            continue
        flag = meta[0]
        dest = flag.lstrip("-").replace("-", "_")
        if not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        if flag.startswith("--no-"):
            value = not value
        elif value is None and f.default is not None:
            continue
        kw[f.name] = value
    weights = {k: getattr(args, flag.lstrip("-").replace("-", "_"), None) for k, (flag, _) in GUIDANCE_FLAGS.items()}
    return cls(**kw, **given).with_weights(w_lang=weights["w_lang_base"], w_plan=weights["w_plan_base"],
                                           s_max=weights["s_max"])
