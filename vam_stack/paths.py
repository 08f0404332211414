"""Where the package's data (models/, config/, launch/) lives: a source checkout or an install."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def share_dir() -> Path:
    """Return the directory holding `models/` and `config/`.

    Order: $VAM_STACK_SHARE, the source checkout this module sits in, then
    `<prefix>/share/vam_stack` of the Python installation (pip or colcon install).
    """
    env = os.environ.get("VAM_STACK_SHARE")
    if env:
        p = Path(env)
        if not (p / "models").is_dir():
            raise FileNotFoundError(f"VAM_STACK_SHARE={env!r} has no models/ directory")
        return p
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "models").is_dir() and (checkout / "package.xml").is_file():
        return checkout
    for prefix in (sys.prefix, os.environ.get("COLCON_PREFIX_PATH", "")):
        if prefix:
            p = Path(prefix) / "share" / "vam_stack"
            if (p / "models").is_dir():
                return p
    raise FileNotFoundError(
        "cannot find vam_stack's share directory (models/, config/); set VAM_STACK_SHARE"
    )


def models_dir() -> Path:
    return share_dir() / "models"


def config_dir() -> Path:
    return share_dir() / "config"
