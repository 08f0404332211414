"""Mocked LIBERO bridge: LIBERO's interface on a kinematic OpenCV tabletop (no ROS, no GPU).

    from vam_sim.libero_mock import make_env, expert_action, SUITES
    env = make_env("spatial", task_id=0, episode=0, seed=0)
    obs = env.reset()
    obs, reward, done, info = env.step(expert_action(env))

See `env.py` for the observation/action contract and `tasks.py` for the suites.
"""
from .config import LiberoMockConfig
from .demos import Demo, record_expert, rollout_expert
from .env import ACTION_DIM, PROPRIO_DIM, LiberoMockEnv, make_env, validate_action
from .expert import PHASES, expert_action, expert_mode, expert_phase
from .tasks import ALL_SUITES, PRETRAIN_SUITES, SUITES, TaskSpec, suite_tasks

__all__ = ["ACTION_DIM", "PROPRIO_DIM", "PHASES", "SUITES", "ALL_SUITES", "PRETRAIN_SUITES", "Demo", "LiberoMockConfig", "LiberoMockEnv",
           "TaskSpec", "expert_action", "expert_mode", "expert_phase", "make_env", "record_expert", "rollout_expert", "suite_tasks",
           "validate_action"]
