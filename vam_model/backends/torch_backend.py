"""`torch` backend: the model's own VideoDiT, eager or through torch.compile."""
from __future__ import annotations

import torch

from .base import DiTBackend


class TorchBackend(DiTBackend):
    name = "torch"

    def __init__(self, dit: torch.nn.Module, compile: bool = False):
        self.dit = dit
        self.compiled = compile
        if compile:
            # one compiled callable per call shape family; dynamic=None lets torch mark the
            # batch/frame sizes dynamic after the first recompile
            self._velocity = torch.compile(dit.velocity)
            self._features = torch.compile(dit.features)
        else:
            self._velocity, self._features = dit.velocity, dit.features

    @torch.no_grad()
    def velocity(self, x, mask, sigma_frames, text):
        return self._velocity(x, mask, sigma_frames, text)                # [B, 16, T, h, w]

    @torch.no_grad()
    def features(self, x, mask, sigma_frames, text):
        return self._features(x, mask, sigma_frames, text)                # [B, T, gh*gw, D]

    def describe(self) -> dict:
        dev = next(self.dit.parameters()).device
        return {"backend": "torch", "compile": self.compiled, "device": str(dev)}
