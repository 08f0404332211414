"""A development ament prefix for a source checkout: what `colcon build --symlink-install` gives a ROS
user, in a second and without colcon, so `ros2 launch vam_stack ...`, launch_ros's
`FindPackageShare("vam_stack")` and `Node(package="vam_stack", executable=...)` find this checkout.

    python -m vam_stack.dev_prefix /tmp/vam_prefix            # then:
    export AMENT_PREFIX_PATH=/tmp/vam_prefix:$AMENT_PREFIX_PATH

The prefix holds the ament index marker, `share/vam_stack/{launch,config,models,package.xml}` as
links to the checkout's files (edits show at once), and `lib/vam_stack/<executable>` for every
console script of setup.py (parsed, not executed: one list), each a small Python script run by
this interpreter that puts the checkout first on `sys.path`. The test suite makes one per run where
ROS 2's launch is importable (tests/conftest.py), so the launch tests start the checkout under test.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "vam_stack"
CHECKOUT = Path(__file__).resolve().parent.parent
SHARED = ("launch", "config", "models", "package.xml")


def console_scripts(root: Path = CHECKOUT) -> dict[str, str]:
    """name -> "module:function" from setup.py's entry_points (parsed, not executed)."""
    tree = ast.parse((root / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "console_scripts":
                    return dict(s.replace(" ", "").split("=", 1) for s in ast.literal_eval(v))
    raise ValueError(f"{root / 'setup.py'} has no console_scripts entry points")


def make_prefix(out: str | Path, root: Path = CHECKOUT, python: str = sys.executable) -> Path:
    """Write (or refresh) the development prefix for checkout `root` at `out`; returns `out`."""
    out = Path(out).resolve()
    if not (root / "package.xml").is_file():
        raise FileNotFoundError(f"{root} is not a source checkout of {PACKAGE} (no package.xml)")
    index = out / "share" / "ament_index" / "resource_index" / "packages"
    share, lib = out / "share" / PACKAGE, out / "lib" / PACKAGE
    for d in (index, share, lib):
        d.mkdir(parents=True, exist_ok=True)
    (index / PACKAGE).write_text("")
    for name in SHARED:          # directories as directories of file links: ros2 launch's search does not
        src = root / name        # follow a linked directory
        files = [f for f in src.rglob("*") if f.is_file() and "__pycache__" not in f.parts] if src.is_dir() else [src]
        for f in files:
            link = share / f.relative_to(root)
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(f)
    for exe, target in console_scripts(root).items():
        module, func = target.split(":")
        script = lib / exe
        script.write_text(f"#!{python}\n# {PACKAGE} development prefix: runs {target} from {root}\n"
                          f"import sys\nsys.path.insert(0, {str(root)!r})\n"
                          f"from {module} import {func}\n"
                          f"if __name__ == '__main__':   # a spawned child (multiprocessing) re-reads this file\n"
                          f"    sys.exit({func}())\n")
        script.chmod(0o755)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m vam_stack.dev_prefix OUT_DIR   (then: export AMENT_PREFIX_PATH=OUT_DIR:"
              "$AMENT_PREFIX_PATH)", file=sys.stderr)
        return 2
    out = make_prefix(args[0])
    print(f"export AMENT_PREFIX_PATH={out}:${{AMENT_PREFIX_PATH}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
