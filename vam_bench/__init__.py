"""vam_bench: every benchmark (`vam-stack bench NAME`), each printing numbers and writing
`--json PATH` (`-` for stdout) the same way; speed targets live here, never in unit tests."""


def backend_list(text: str) -> list[str]:
    """`--backend torch,onnxruntime` (or the flag repeated): the backends named, each checked."""
    import argparse

    from vam_model.backends import BACKENDS

    names = [b.strip() for b in text.split(",") if b.strip()]
    bad = [b for b in names if b not in BACKENDS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"unknown backend {', '.join(bad) or repr(text)}; choose from "
                                         f"{', '.join(BACKENDS)} (comma-separated, or the flag repeated)")
    return names
