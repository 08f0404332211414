"""Progress bars that suit both a terminal and a log file.

On a terminal a tqdm bar redraws in place. Written to a log or a pipe, every redraw is a new
line (a 500-episode `collect` wrote over a thousand), so there the bar prints at most once per
`LOG_INTERVAL_S` and once more when it closes.
"""
from __future__ import annotations

import sys
from typing import Any

LOG_INTERVAL_S = 30.0  # seconds between progress lines when the output is not a terminal


def progress_bar(iterable: Any = None, **kwargs: Any):
    """`tqdm(iterable, **kwargs)`, throttled to one line per LOG_INTERVAL_S off a terminal."""
    from tqdm import tqdm

    stream = kwargs.get("file") or sys.stderr
    isatty = getattr(stream, "isatty", None)
    if not (callable(isatty) and isatty()):
        kwargs.setdefault("mininterval", LOG_INTERVAL_S)
        kwargs.setdefault("maxinterval", LOG_INTERVAL_S * 4)
    return tqdm(iterable, **kwargs)
