"""Entry module for `vam-stack eval` (see vam_sim.cli)."""
from .cli import add_eval_arguments as add_arguments  # noqa: F401
from .cli import run_eval as run  # noqa: F401
