"""The policy node's parameters (generated from the config dataclasses where one owns the setting)
and what they build: the guidance settings, the policy (in this process or a child) and the control
loop around it; live tuning."""
from __future__ import annotations

import dataclasses
import functools

from vam_model.backends.base import BACKENDS, PRECISIONS, BackendConfig
from vam_model.guidance import GuidanceConfig, guidance_label
from vam_stack.names import GUIDANCE_SCHEDULES as SCHEDULES, TR_BASELINES
from vam_model.policy import AUTOCAST, PolicyConfig, check_action_temperature
from vam_stack.views import fit_views
from vam_control.build import build_runtime, release
from vam_control.runtime import OVERRUN_ACTIONS, RuntimeConfig, warm_up
from vam_control.schedule import RTC_MODES, ExecutorConfig
from vam_stack import ros
from vam_stack.refusals import describe

P = ros.Param
TUNABLE = ("guidance", "tr_every_step", "w_lang_base", "w_plan_base", "s_max", "action_temperature")
WEIGHT_RANGE = (0.0, 5.0)
# command_outputs: the ros2_control outputs each value publishes besides /vam/joint_targets
OUTPUTS = {"none": (), "joint_trajectory": ("joint_trajectory",), "forward_command": ("forward_commands",),
           "both": ("joint_trajectory", "forward_commands")}
# The guidance, policy and runtime settings are generated from their config dataclasses (default
# and description from the field and its comment); only the node's own wiring is written here.
def _auto_backend(params) -> tuple:
    """`backend` takes `auto` too, its default: onnxruntime on a CPU, torch on CUDA, as `vam-stack sim`
    and `eval` choose (a yam64 replan took 7-16 s in torch on a loaded 2-core CPU, 0.13-0.4 s in
    onnxruntime: the arm never moved)."""
    return tuple(dataclasses.replace(q, default="auto", choices=("auto", *q.choices),
                                     description="auto (onnxruntime on a CPU, torch on CUDA) | " + q.description)
                 if q.name == "backend" else q for q in params)


def resolve_backend(backend: str, device: str, say=None) -> str:
    """The backend `auto` stands for on `device` (`vam_model.backends.auto_backend`: torch, said in one
    line to `say`, where onnxruntime is not installed); any other name as given."""
    if backend != "auto":
        return backend
    from vam_model.backends import auto_backend
    from vam_model.device import resolve_device

    return auto_backend(resolve_device(device).type, say)


PARAMS = (
    P("preset", "tiny", "model preset (models/<preset>.yaml) used when no checkpoint is given; with a "
                        "checkpoint it must be the checkpoint's preset (a mismatch is an error naming both)"),
    P("checkpoint", "", "safetensors checkpoint; empty = models/<preset>.safetensors if shipped, "
                        "else seeded random weights"),
    *ros.params_from(GuidanceConfig, ("schedule", "tr_baseline", "tr_every_step", "w_lang_base", "w_plan_base",
                                      "s_max"),
                     rename={"schedule": "guidance"}, choices={"schedule": SCHEDULES, "tr_baseline": TR_BASELINES},
                     ranges={"w_lang_base": WEIGHT_RANGE, "w_plan_base": WEIGHT_RANGE, "s_max": (0.0, 10.0)},
                     live=("schedule", "tr_every_step", "w_lang_base", "w_plan_base", "s_max")),
    *ros.params_from(PolicyConfig, ("seed", "threads", "action_temperature", "device", "autocast"),
                     ranges={"seed": (0, 2**32 - 1), "threads": (0, 256), "action_temperature": (0.0, 1.0)},
                     choices={"autocast": tuple(AUTOCAST)}, live=("action_temperature",)),
    *_auto_backend(ros.params_from(BackendConfig, ("name", "precision"),
                                   rename={"name": "backend", "precision": "backend_precision"},
                                   choices={"name": BACKENDS, "precision": PRECISIONS})),
    *ros.params_from(ExecutorConfig, ("rtc",), choices={"rtc": RTC_MODES}),
    *ros.params_from(RuntimeConfig, ("max_frame_age_s", "max_state_age_s", "on_overrun"),
                     ranges={"max_frame_age_s": (0.01, 10.0), "max_state_age_s": (0.01, 10.0)},
                     choices={"on_overrun": OVERRUN_ACTIONS}),
    P("instruction", "", "episode started as soon as frames and joint states arrive; empty = wait for /vam/instruction"),
    P("safety_config", "", "safety limits YAML (absolute joint targets); empty = config/yam_safety.yaml"),
    P("rt_priority", 0, "SCHED_FIFO priority of the executor tick thread, 0 = normal scheduling", range=(0, 99)),
    ros.PROCESS_RT_PRIORITY,
    P("policy_process", False, "run the policy in a child process (its Python work off the tick thread's GIL)"),
    P("image_transport", "raw", "stacked frame subscription: raw (/camera/stacked/image_raw) | compressed (its JPEG "
                                "twin .../image_raw/compressed, image_transport's compressed transport, decoded here)",
      choices=("raw", "compressed")),
    P("command_outputs", "none", "also publish each safety-filtered target for ros2_control: joint_trajectory "
                                 "(/vam/joint_trajectory, a one-point JointTrajectory reached one period later, for "
                                 "joint_trajectory_controller) | forward_command (/vam/commands, Float64MultiArray, for "
                                 "forward_command_controller) | both | none; absolute joint targets only",
      choices=tuple(OUTPUTS)),
    P("autostart", True, "configure (load and warm up the policy) and activate (take instructions) at start-up; "
                         "false: drive the lifecycle services yourself"),
    P("warm_up", True, "at configure, run the policy on a blank observation with every guidance branch, so the "
                       "first replan after an instruction takes its steady-state time"),
    P("camera_rate_hz", 30.0, "nominal rate of the stacked camera topic: frames missed on /diagnostics count against "
                              "it [Hz]", range=(1.0, 1000.0)),
    ros.DIAGNOSTICS_PERIOD,
)


def guidance_from(p: dict) -> GuidanceConfig:
    """The guidance settings the parameters name (ConfigError naming a bad combination)."""
    if p["tr_baseline"] != "first" and p["guidance"] != "tr_adaptive":
        raise ros.ParameterError(f"tr_baseline {p['tr_baseline']!r} is a baseline of guidance 'tr_adaptive'; "
                                 f"guidance {p['guidance']!r} never reads it")
    return GuidanceConfig(schedule=p["guidance"], tr_baseline=p["tr_baseline"], tr_every_step=p["tr_every_step"],
                          w_lang_base=p["w_lang_base"], w_plan_base=p["w_plan_base"], s_max=p["s_max"])


def policy_from_params(p: dict, log=None):
    """The policy the parameters name (`policy_process`: a ProcessPolicy proxy, the model in a child)."""
    from vam_model.networks.checkpoint import resolve_checkpoint
    from vam_model.policy import build_policy as build

    if p[ros.PROCESS_RT_PRIORITY.name] and not p["policy_process"]:
        raise ros.ParameterError(f"{ros.PROCESS_RT_PRIORITY.name} {p[ros.PROCESS_RT_PRIORITY.name]!r} needs "
                                 f"policy_process: true (the inference's threads would run SCHED_FIFO in this "
                                 f"process and take every core from the rest of the graph)")
    ckpt, _ = resolve_checkpoint(p["checkpoint"], p["preset"], p["preset"])
    guidance = guidance_from(p)
    cfg = PolicyConfig(seed=p["seed"], threads=p["threads"], action_temperature=p["action_temperature"],
                       device=p["device"], autocast=p["autocast"], guidance=guidance,
                       backend=BackendConfig(name=resolve_backend(p["backend"], p["device"],
                                                                  None if log is None else log.warning),
                                             precision=p["backend_precision"]))
    factory = functools.partial(build, p["preset"], checkpoint=ckpt, guidance=guidance_label(guidance), config=cfg)
    if p["policy_process"]:
        from vam_control.executor_worker import ProcessPolicy
        return ProcessPolicy(factory)
    return factory()


def tune_live(policy, params: dict, changes: dict, log) -> tuple[bool, str, dict]:
    """(ok, reason, parameters) after a live change (TUNABLE only: the guidance schedule, weights,
    s_max, TR per step, the action temperature), applied to `policy` from its next replan (None: they
    take effect at configure). The whole new setting is checked before anything changes; a refusal
    says why and keeps `params`. A service call never ends the node: any error is a refusal."""
    try:
        unknown = sorted(set(changes) - set(TUNABLE))
        if unknown:
            raise ros.ParameterError(f"{unknown} cannot change while the node runs")
        merged = {**params, **changes}
        guidance = guidance_from(merged)
        check_action_temperature(merged["action_temperature"], "action_temperature")
        if policy is not None and changes:
            if not hasattr(policy, "configure"):
                raise ros.ParameterError(f"this policy ({type(policy).__name__}) cannot be tuned live")
            policy.configure(guidance=guidance, action_temperature=float(merged["action_temperature"]))
    except (ValueError, TypeError) as e:      # ConfigError / ParameterError are ValueErrors
        return False, str(e), params
    except Exception as e:
        return False, f"internal error: {describe(e)}", params
    if changes:
        log.info("tuned live (from the next replan): " + ", ".join(f"{k}={v!r}" for k, v in sorted(changes.items())))
    return True, "", merged


def control_from_params(policy, p: dict, send, on_telemetry, log):
    """The control loop the parameters build around `policy` (`vam_control.build.build_runtime`: for
    absolute joint targets the robot description names the joints and the safety filter bounds them),
    warmed up (`warm_up`). Returns (Control, the warm-up's seconds per part)."""
    s = policy.spec
    if s.action_type == "eef_delta" and OUTPUTS[p["command_outputs"]]:
        raise ros.ParameterError(f"command_outputs {p['command_outputs']!r} needs absolute joint targets; this "
                                 f"policy sends {s.action_type!r}")
    control = build_runtime(policy, {**p, "safety_config": ros.config_path(p["safety_config"], "yam_safety.yaml")},
                            send, on_telemetry, log=log, fit_views=fit_views)
    times = {}
    if p["warm_up"]:
        try:
            times = warm_up(policy, guidance_from(p), p["seed"])
        except BaseException:
            release(control.runtime, None, 1.0)
            raise
        log.info("warmed up: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
    log.info(f"{s.action_type} policy, {s.action_dim} actions at {s.rate_hz} Hz, "
             f"input: the current {s.height}x{s.width} stacked frame and {s.proprio_dim} proprio")
    return control, times
