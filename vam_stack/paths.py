"""Where the package's data (models/, config/, launch/) lives: a source checkout or an install.

Found the way ROS 2 packages find theirs, with the non-ROS cases beside it:
1. `$VAM_STACK_SHARE` (an explicit override);
2. the source checkout this module sits in (development, `pip install -e .`);
3. ament_index (`ament_index_python.get_package_share_directory`, when importable): any colcon
   install, isolated (the default: `install/vam_stack/share/vam_stack`) or merged, from the
   sourced workspace's `AMENT_PREFIX_PATH`;
4. the install prefix this module was installed into (a colcon install whose setup script
   was not sourced: `<prefix>/lib/pythonX.Y/site-packages/vam_stack/paths.py`);
5. each prefix on `AMENT_PREFIX_PATH` / `COLCON_PREFIX_PATH` (':'-separated; for the latter
   also `<base>/vam_stack`, the isolated layout), read directly when ament_index is absent;
6. `sys.prefix` (a plain `pip install .`).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = "vam_stack"


def _has_data(p: Path) -> bool:
    return (p / "models").is_dir() and (p / "config").is_dir()


def _candidates() -> list[tuple[str, Path]]:
    """(how found, share directory) in the order of the module docstring (steps 3-6)."""
    out: list[tuple[str, Path]] = []
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        pass
    else:
        try:
            out.append(("ament_index", Path(get_package_share_directory(PACKAGE))))
        except (PackageNotFoundError, ValueError):
            pass
    here = Path(__file__).resolve()
    for parent in here.parents:                        # <prefix>/lib/python3.X/site-packages/vam_stack/
        if parent.name == "lib":
            out.append(("install prefix", parent.parent / "share" / PACKAGE))
            break
    for var in ("AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH"):
        for prefix in filter(None, os.environ.get(var, "").split(os.pathsep)):
            out.append((var, Path(prefix) / "share" / PACKAGE))
            if var == "COLCON_PREFIX_PATH":             # the install base of an isolated build
                out.append((var, Path(prefix) / PACKAGE / "share" / PACKAGE))
    out.append(("sys.prefix", Path(sys.prefix) / "share" / PACKAGE))
    return out


def share_dir() -> Path:
    """Return the directory holding `models/` and `config/` (see the module docstring)."""
    env = os.environ.get("VAM_STACK_SHARE")
    if env:
        p = Path(env)
        if not (p / "models").is_dir():
            raise FileNotFoundError(f"VAM_STACK_SHARE={env!r} has no models/ directory")
        return p
    checkout = Path(__file__).resolve().parent.parent
    if _has_data(checkout) and (checkout / "package.xml").is_file():
        return checkout
    tried = []
    for how, p in _candidates():
        if _has_data(p):
            return p
        tried.append(f"{how}: {p}")
    raise FileNotFoundError("cannot find vam_stack's share directory (models/, config/); looked in "
                            + "; ".join(tried) + ". Source the workspace's install/setup.bash or set VAM_STACK_SHARE")


def models_dir() -> Path:
    return share_dir() / "models"


def config_dir() -> Path:
    return share_dir() / "config"


def preset_file(preset: str) -> Path:
    """The model YAML a preset argument names: a .yaml/.yml path as given, else models/<preset>.yaml
    (whether it exists is the caller's to check)."""
    p = Path(preset)
    return p if p.suffix in (".yaml", ".yml") else models_dir() / f"{preset}.yaml"


def config_file(value: str, default_name: str) -> Path:
    """A config-file parameter or launch argument: "" means config/<default_name>; a bare file name
    that is not in the working directory is looked up in config/ too (`camera_config:=cameras_synthetic.yaml`)."""
    if not value:
        return config_dir() / default_name
    p = Path(value)
    if not p.exists() and p.name == value and (config_dir() / value).is_file():
        return config_dir() / value
    return p
