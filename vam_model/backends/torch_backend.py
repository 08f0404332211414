"""`torch` backend: the model's own VideoDiT and action head, eager or through torch.compile,
on whatever device the model is on."""
from __future__ import annotations

import torch

from .base import DiTBackend
from ..networks.head_io import HeadCache, HeadOutput, prefix_kv, step_outputs


class TorchBackend(DiTBackend):
    name = "torch"
    head_runtime = "torch"

    def __init__(self, model, compile: bool = False):
        self.model = model
        self.dit = model.dit
        self.compiled = compile
        c = model.cfg
        self._head_args = (c.head.tr_layer, c.head_tokens_per_frame, c.head_video_tokens)
        if compile:
            # one compiled callable per call shape family; dynamic=None lets torch mark the
            # batch/frame sizes dynamic after the first recompile
            self._velocity = torch.compile(self.dit.velocity)
            self._features = torch.compile(self.dit.features)
        else:
            self._velocity, self._features = self.dit.velocity, self.dit.features

    @torch.no_grad()
    def velocity(self, x, mask, sigma_frames, text):
        return self._velocity(x, mask, sigma_frames, text)                # [B, 16, T, h, w]

    @torch.no_grad()
    def features(self, x, mask, sigma_frames, text):
        return self._features(x, mask, sigma_frames, text)                # [B, T, gh*gw, D]

    @torch.no_grad()
    def head_prefix(self, feats, sigma_v, state) -> HeadCache:
        return HeadCache(*prefix_kv(self.model.head, self.model.cfg.dit_grid, feats, sigma_v, state))

    @torch.no_grad()
    def head_step(self, cache: HeadCache, actions, sigma_a) -> HeadOutput:
        return HeadOutput(*step_outputs(self.model.head, cache.keys, cache.values, actions, sigma_a, *self._head_args))

    def describe(self) -> dict:
        dev = next(self.dit.parameters()).device
        return {"backend": "torch", "head": self.head_runtime, "compile": self.compiled, "device": str(dev)}
