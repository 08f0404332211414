"""Scene layouts: a fixed arrangement per task, jittered per episode (as LIBERO builds them).

A scene is a list of `Place` entries. `solve_layout` turns it into nominal positions with a
random generator seeded by the task's layout key only, so every episode of a task shares one
layout; `build_entities` then adds the per-episode jitter drawn from the episode generator.
Free spots keep a clearance of both objects' jitter plus a margin, so jittered scenes never
overlap.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .config import LiberoMockConfig
from .objects import Kind, kind
from .world import Entity

# Region of the table where free objects are put (metres); leaves room at the edges.
FREE_X = (-0.36, 0.36)
FREE_Y = (-0.22, 0.30)
MARGIN = 0.012  # m of clearance between footprints beyond both jitters
LAYOUT_RADIUS_MIN = 0.03  # m; small objects are spaced as if this big (swap-safe layouts)


@dataclass(frozen=True)
class Place:
    """Where one instance starts. `where` is one of:
    ("xy", x, y[, yaw]) fixed spot; ("free",) sampled spot; ("center",) table centre;
    ("on", ref) / ("in", ref) resting on/in ref; ("next_to", ref) sampled beside ref;
    ("between", a, b) midpoint of a and b; ("front_of", ref, z) touching ref's front;
    ("drawer", cabinet, z[, q]) a drawer in the cabinet's
    front at bottom height z, pulled out to q (0 closed .. 1 fully open); ("joint", q) sets an
    articulated fixture's starting q (a door left open).
    """

    name: str  # instance name, "<kind>_<n>"
    where: tuple  # placement rule, see above

    @property
    def kind(self) -> Kind:
        return kind(self.name.rsplit("_", 1)[0])


def stable_seed(*parts: object) -> int:
    """64-bit seed from a SHA-256 of the parts (stable across runs, unlike hash())."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


def _layout_radius(k: Kind) -> float:
    return max(k.radius, LAYOUT_RADIUS_MIN) if k.movable else k.radius


def solve_layout(places: tuple[Place, ...], layout_key: str, cfg: LiberoMockConfig) -> dict:
    """Nominal (x, y, z_bottom, support) of every place; deterministic in `layout_key`."""
    rng = np.random.default_rng(stable_seed("layout", layout_key))
    out: dict[str, tuple] = {}  # name -> (x, y, z_bottom, support, yaw, q)
    floor: list[tuple[str, float, float, float, float]] = []  # (name, x, y, radius, jitter)

    def jit(k: Kind) -> float:
        return cfg.object_jitter if k.movable else cfg.fixture_jitter

    def blocker(x: float, y: float, r: float, j: float, ignore: str | None = None) -> str | None:
        for n, fx, fy, fr, fj in floor:
            if n != ignore and math.hypot(x - fx, y - fy) < r + fr + j + fj + MARGIN:
                return n
        return None

    def clear(x: float, y: float, r: float, j: float) -> bool:
        return blocker(x, y, r, j) is None

    def sample(k: Kind, centre=None, dist=None) -> tuple[float, float]:
        r, j = _layout_radius(k), jit(k)
        for _ in range(4000):
            if centre is None:
                x, y = rng.uniform(*FREE_X), rng.uniform(*FREE_Y)
            else:
                a = rng.uniform(-math.pi, math.pi)
                x, y = centre[0] + dist * math.cos(a), centre[1] + dist * math.sin(a)
                if not (FREE_X[0] <= x <= FREE_X[1] and FREE_Y[0] <= y <= FREE_Y[1]):
                    continue
            if clear(x, y, r, j):
                return x, y
        raise RuntimeError(f"layout {layout_key!r}: no free spot for {k.name}")

    for p in places:
        k, rule = p.kind, p.where[0]
        if rule in ("on", "in"):
            ref = out[p.where[1]]
            rk = kind(p.where[1].rsplit("_", 1)[0])
            z = ref[2] + (rk.floor if rk.container else rk.h)
            out[p.name] = (ref[0], ref[1], z, p.where[1], 0.0, 0.0)
            continue
        if rule == "joint":  # the previous placement of this instance, with its joint set
            x, y, z, sup, yaw, _ = out[p.name]
            out[p.name] = (x, y, z, sup, yaw, float(p.where[1]))
            continue
        if rule == "drawer":
            ref = out[p.where[1]]
            rk = kind(p.where[1].rsplit("_", 1)[0])
            yaw, depth = ref[4], rk.hy - k.hy  # front flush with the cabinet's front (own -y)
            q = float(p.where[3]) if len(p.where) > 3 else 0.0
            dx, dy = math.sin(yaw) * depth, -math.cos(yaw) * depth
            out[p.name] = (ref[0] + dx, ref[1] + dy, float(p.where[2]), None, yaw, q)
            continue  # inside the cabinet's footprint: it blocks nothing new
        if rule == "front_of":
            ref = out[p.where[1]]
            rk = kind(p.where[1].rsplit("_", 1)[0])
            out[p.name] = (ref[0], ref[1] - rk.hy - k.hy, float(p.where[2]), None, 0.0, 0.0)
        elif rule == "xy":
            yaw = float(p.where[3]) if len(p.where) > 3 else 0.0
            out[p.name] = (float(p.where[1]), float(p.where[2]), 0.0, None, yaw, 0.0)
        elif rule == "center":
            out[p.name] = (0.0, 0.0, 0.0, None, 0.0, 0.0)
        elif rule == "between":
            a, b = out[p.where[1]], out[p.where[2]]
            out[p.name] = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2, 0.0, None, 0.0, 0.0)
        elif rule == "next_to":
            ref = out[p.where[1]]
            rk = kind(p.where[1].rsplit("_", 1)[0])
            dist = _layout_radius(k) + _layout_radius(rk) + jit(k) + jit(rk) + MARGIN + 0.01
            out[p.name] = (*sample(k, (ref[0], ref[1]), dist), 0.0, None, 0.0, 0.0)
        elif rule == "free":
            out[p.name] = (*sample(k), 0.0, None, 0.0, 0.0)
        else:
            raise ValueError(f"unknown placement rule {p.where!r} for {p.name}")
        x, y = out[p.name][:2]
        hit = blocker(x, y, _layout_radius(k), jit(k), p.where[1] if rule == "front_of" else None)
        if rule in ("xy", "center", "between", "front_of") and hit is not None:
            raise RuntimeError(f"layout {layout_key!r}: {p.name} at ({x:.3f}, {y:.3f}) overlaps {hit}")
        floor.append((p.name, x, y, _layout_radius(k), jit(k)))
    for name, (x, y, z, sup, yaw, q) in list(out.items()):  # open drawers stick out of the cabinet
        j = kind(name.rsplit("_", 1)[0]).joint
        if j is not None and j.kind == "slide" and q > 0:
            out[name] = (x + math.sin(yaw) * q * j.travel, y - math.cos(yaw) * q * j.travel, z, sup, yaw, q)
    return out


def build_entities(places: tuple[Place, ...], nominal: dict, rng: np.random.Generator,
                   cfg: LiberoMockConfig, swap: tuple[str, str] | None = None) -> list[Entity]:
    """Entities at the nominal layout plus this episode's jitter (stacked things follow)."""
    nominal = dict(nominal)
    if swap is not None:  # swapped name-to-appearance binding: exchange the two positions
        a, b = swap
        nominal[a], nominal[b] = nominal[b], nominal[a]
    ents: dict[str, Entity] = {}
    shift: dict[str, np.ndarray] = {}
    for p in places:  # parents always come before what rests on them
        if p.name in ents:  # a ("joint", q) line after the instance's placement
            continue
        x, y, z, support, yaw, q = nominal[p.name]
        k = p.kind
        if support is not None or p.where[0] in ("drawer", "front_of"):
            parent = support if support is not None else p.where[1]
            d = shift[parent] + np.append(rng.uniform(-0.004, 0.004, 2), 0.0) * (support is not None)
        else:
            j = cfg.object_jitter if k.movable else cfg.fixture_jitter
            d = np.append(rng.uniform(-j, j, 2), 0.0)
        if k.shape == "box" and k.movable:
            yaw = float(rng.uniform(-cfg.yaw_jitter, cfg.yaw_jitter))
        shift[p.name] = d
        ents[p.name] = Entity(p.name, k, np.array([x, y, z]) + d, yaw, support, q=q)
    return list(ents.values())
