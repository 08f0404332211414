"""Name lists several packages share, written once: the guidance schedules and the labels results
carry, the simulated YAM's tasks, and where the scripted expert's joint noise acts.

Plain tuples, importing none of our packages, so a launch file, a CLI parser or a study config
can check a name without loading the model, MuJoCo or ROS. The code behind each name lives
where it acts: the schedules in `vam_model.guidance`, the tasks in `vam_sim.yam_mujoco.tasks`
(its `TASKS` table has exactly these keys, in this order), the noise in
`vam_sim.yam_mujoco.runner.JointNoise`.
"""
from __future__ import annotations

GUIDANCE_SCHEDULES = ("none", "flat", "tr_adaptive")   # none: w = 0 | flat: the base weights | tr_adaptive: scaled by TR
TR_BASELINES = ("first", "running_min")   # TR_0 of tr_adaptive: first (the paper's) | running_min (a labelled ablation)
# names results carry: a schedule, or 'tr_adaptive+<baseline>' for an ablated TR_0 (vam_model.guidance.guidance_label)
GUIDANCE_LABELS = GUIDANCE_SCHEDULES + tuple(f"tr_adaptive+{b}" for b in TR_BASELINES[1:])

YAM_TASKS = ("handover", "relay", "tray_lift")   # the simulated YAM's bimanual tasks (vam_sim.yam_mujoco.tasks)

NOISE_WHERE = ("everywhere", "free_space")   # where the expert's joint noise acts (free_space: faded out near objects)
NOISE_WHERE_FLAGS = tuple(w.replace("_", "-") for w in NOISE_WHERE)   # the same, as command-line values

__all__ = ["GUIDANCE_SCHEDULES", "TR_BASELINES", "GUIDANCE_LABELS", "YAM_TASKS", "NOISE_WHERE", "NOISE_WHERE_FLAGS"]
