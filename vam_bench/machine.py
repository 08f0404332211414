"""The machine a benchmark ran on, for its JSON: every `vam-stack bench` command runs inside a
`MachineWatch`, and `vam_stack.outputs.write_json_output` adds its `snapshot()` as `machine`.

A benchmark's numbers on this project's 2-core machine depend on what else runs on it (other
sessions, a data-generation job) and on the host, which stops a CPU for ~100 ms at a time
(`vam_stack.realtime.HostFreezeProbe`). Each JSON therefore carries: the cores, the 1-minute load
average at the start, at the time of writing and the highest sampled in between (every 5 s), and
the host's freezes of >= 40 ms over the run (count, durations)."""
from __future__ import annotations

import os
import threading
import time

SAMPLE_S = 5.0


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


class MachineWatch:
    """`with MachineWatch() as w: ... w.snapshot()` (see the module docstring). A probe that cannot
    start (no /proc, no second interpreter) leaves `host_freezes` as None, said in `note`."""

    def __init__(self, freezes: bool = True):
        self._want_freezes = freezes
        self._probe = None
        self._stop = threading.Event()
        self._samples: list[float] = []
        self.note = ""

    def __enter__(self) -> "MachineWatch":
        self.t0 = time.monotonic()
        self.load_start = _load()
        if self.load_start is not None:
            self._samples.append(self.load_start)
        self._thread = threading.Thread(target=self._sample, daemon=True, name="machine-watch")
        self._thread.start()
        if self._want_freezes:
            from vam_stack.realtime import HostFreezeProbe

            try:
                self._probe = HostFreezeProbe().__enter__()
            except (OSError, ValueError) as e:
                self._probe, self.note = None, f"host freeze probe not started: {e}"
        return self

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            v = _load()
            if v is not None:
                self._samples.append(v)

    def snapshot(self) -> dict:
        """What the benchmark ran under, until now."""
        now = _load()
        loads = self._samples + ([now] if now is not None else [])
        out = {"cpus": os.cpu_count(), "seconds": round(time.monotonic() - self.t0, 1),
               "load_1min": {"start": self.load_start, "end": now, "max": max(loads) if loads else None}}
        if self._probe is not None:
            f = self._probe.so_far()
            out["host_freezes"] = {"n": len(f), "threshold_ms": round(1e3 * self._probe.threshold_s),
                                   "ms": [round(x[2], 1) for x in f][:200]}
        else:
            out["host_freezes"] = None
        if self.note:
            out["note"] = self.note
        return out

    def line(self) -> str:
        """The snapshot in one line, for the terminal."""
        s = self.snapshot()
        ld, h = s["load_1min"], s["host_freezes"]
        load = "load n/a" if ld["start"] is None else f"load {ld['start']:.1f} at the start, {ld['max']:.1f} at most"
        host = "host freezes not measured" if h is None else (
            f"the host stopped a CPU for >= {h['threshold_ms']} ms {h['n']} times"
            + (f" (longest {max(h['ms']):.0f} ms)" if h["ms"] else ""))
        return f"machine: {s['cpus']} cores, {load}, {host} over {s['seconds']:.0f} s (in the JSON as `machine`)"

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._probe is not None:
            self._probe.__exit__(*exc)
