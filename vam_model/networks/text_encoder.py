"""Prompt embeddings: every hidden layer of a `transformers` encoder, concatenated.

The real model uses a Qwen2.5-VL-7B-class encoder (28 layers x 3584 = 100352 features per
token); the tiny preset uses a MiniLM-L6 class encoder (6 x 384 = 2304). Weights load from a
local directory only (`local_files_only`): nothing is fetched at run time. The embedding
depends only on the instruction, so it is computed once per instruction and cached.

Two recipes, chosen by the encoder's type so that training and inference always agree:
  cosmos  (Qwen2.5-VL, what Cosmos-Predict2.5 was trained with, as diffusers'
          `Cosmos2_5_PredictBasePipeline._get_prompt_embeds` computes it): the instruction in
          Qwen's chat template after a fixed system message, padded to `max_tokens`; every
          hidden state after the embedding layer normalised over its features,
          (h - mean) / (std + 1e-8); padding positions kept (the DiT saw them in pre-training).
  plain   (every other encoder, the CPU presets): the bare instruction, raw hidden states,
          padding positions zeroed.

The encoder sees at most `max_tokens` tokens (the preset's `dit.text_tokens`, special tokens
included). A longer instruction is cut to that window, so two instructions that differ only
after it get the same embedding; this is not refused but logged once per distinct instruction
(`logging.warning`, with the instruction's token count and the window).
"""
from __future__ import annotations

import importlib.util
import json
import logging
from collections import OrderedDict
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

log = logging.getLogger(__name__)


def resolve_encoder_path(spec: str) -> Path:
    """`pkg:<module>/<subdir>` (a model shipped inside an installed package) or a directory."""
    if spec.startswith("pkg:"):
        module, _, sub = spec[4:].partition("/")
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            raise FileNotFoundError(f"text encoder package {module!r} is not installed (spec {spec!r})")
        path = Path(list(found.submodule_search_locations)[0]) / sub
    else:
        path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"text encoder directory {str(path)!r} has no config.json (spec {spec!r})")
    return path


COSMOS_TYPES = ("qwen2_5_vl",)   # encoder model types embedded with the Cosmos recipe
COSMOS_SYSTEM = "You are a helpful assistant who will provide prompts to an image generator."


def encoder_dims(config) -> tuple[int, int]:
    """(hidden layers, hidden width) of an encoder config (a VL model's text part)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text.num_hidden_layers), int(text.hidden_size)


def recipe_for(config) -> str:
    return "cosmos" if getattr(config, "model_type", "") in COSMOS_TYPES else "plain"


class TextEncoder:
    """Instruction -> [1, max_tokens, layers * hidden] embedding (by the encoder's recipe), cached."""

    def __init__(self, spec: str, max_tokens: int, expected_dim: int | None = None, cache_size: int = 64):
        from transformers import AutoConfig, AutoModel, AutoTokenizer   # heavy (~0.6 s): only when an encoder loads

        self.path = resolve_encoder_path(spec)
        config = AutoConfig.from_pretrained(self.path, local_files_only=True)
        self.recipe = recipe_for(config)
        layers, hidden = encoder_dims(config)
        self.dim = layers * hidden
        if expected_dim is not None and self.dim != expected_dim:
            raise ValueError(
                f"text encoder at {str(self.path)!r} gives {layers} layers x {hidden} = "
                f"{self.dim} features per token, but the preset expects dit.text_in_dim={expected_dim}"
            )
        self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        kw = {"dtype": "auto"} if self.recipe == "cosmos" else {}   # a 7B encoder stays in its stored bf16
        self.model = AutoModel.from_pretrained(self.path, local_files_only=True, **kw).eval()
        self.max_tokens = max_tokens
        self._cache: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._cache_size = cache_size
        self.hits = 0
        self.misses = 0
        self.truncated: dict[str, int] = {}   # instruction -> its full token count, for those cut to the window

    @torch.no_grad()
    def encode(self, instruction: str) -> torch.Tensor:
        if not isinstance(instruction, str) or not instruction.strip():
            raise ValueError(f"instruction must be a non-empty string, got {instruction!r}")
        if instruction in self._cache:
            self.hits += 1
            self._cache.move_to_end(instruction)
            return self._cache[instruction]
        self.misses += 1
        self._warn_if_truncated(instruction)
        emb = self._cosmos(instruction) if self.recipe == "cosmos" else self._plain(instruction)
        self._cache[instruction] = emb
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return emb

    def _plain(self, instruction: str) -> torch.Tensor:
        enc = self.tokenizer(instruction, return_tensors="pt", truncation=True, max_length=self.max_tokens)
        out = self.model(**enc, output_hidden_states=True)
        hidden = torch.cat(out.hidden_states[1:], dim=-1)               # [1, L, layers*hidden] (embeddings excluded)
        hidden = hidden * enc["attention_mask"][..., None]              # [1, L, F] padding zeroed
        emb = torch.zeros(1, self.max_tokens, self.dim)                  # [1, max_tokens, F]
        emb[:, : hidden.shape[1]] = hidden
        return emb

    def _chat_ids(self, instruction: str, **kw) -> list[int]:
        chat = [{"role": "system", "content": [{"type": "text", "text": COSMOS_SYSTEM}]},
                {"role": "user", "content": [{"type": "text", "text": instruction}]}]
        ids = self.tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=False,
                                                 add_vision_id=False, **kw)
        return list(ids["input_ids"] if not isinstance(ids, list) else ids)

    def _cosmos(self, instruction: str) -> torch.Tensor:
        ids = self._chat_ids(instruction, max_length=self.max_tokens, truncation=True, padding="max_length")
        out = self.model(torch.tensor([ids]), output_hidden_states=True)  # no attention mask, as the pipeline
        layers = []
        for h in out.hidden_states[1:]:                                  # embeddings excluded
            h = h.float()                                                # [1, max_tokens, hidden]
            layers.append((h - h.mean(-1, keepdim=True)) / (h.std(-1, keepdim=True) + 1e-8))
        return torch.cat(layers, dim=-1)                                 # [1, max_tokens, layers*hidden]

    def _token_count(self, instruction: str) -> int:
        if self.recipe == "cosmos":
            return len(self._chat_ids(instruction))
        return len(self.tokenizer(instruction, truncation=False, verbose=False)["input_ids"])

    def _warn_if_truncated(self, instruction: str) -> None:
        if instruction in self.truncated:
            return
        n = self._token_count(instruction)
        if n > self.max_tokens:
            self.truncated[instruction] = n
            log.warning("instruction has %d tokens, more than the text encoder's window of %d: only the first %d "
                        "are used, so instructions that differ after them get the same embedding: %r",
                        n, self.max_tokens, self.max_tokens, instruction)


# ---- precomputed embeddings (machines without the encoder's weights) -----------------------
def save_text_embeddings(path: str | Path, spec: str, embeddings: dict[str, torch.Tensor]) -> Path:
    """Write {instruction: [1, L, F]} as one safetensors file; the metadata names the encoder
    spec and the instructions in key order."""
    if not embeddings:
        raise ValueError("save_text_embeddings: no instructions to save")
    names = sorted(embeddings)
    tensors = {f"t{i:04d}": embeddings[n].detach().float().contiguous().cpu() for i, n in enumerate(names)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={"text_encoder": spec, "instructions": json.dumps(names)})
    return path


def load_text_embeddings(path: str | Path, spec: str, max_tokens: int, dim: int) -> dict[str, torch.Tensor]:
    """Read a `save_text_embeddings` file, checking that the same encoder made it and that every
    embedding is [1, max_tokens, dim]."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"text embeddings file {str(path)!r} not found (write it with "
                                f"`vam-stack train --write-text-embeddings FILE` where the encoder is installed)")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if meta.get("text_encoder") != spec:
            raise ValueError(f"{path}: embeddings were made with text encoder {meta.get('text_encoder')!r}, "
                             f"the config asks for {spec!r}")
        try:
            names = json.loads(meta["instructions"])
        except (KeyError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: metadata 'instructions' is missing or not a JSON list ({e})") from None
        out = {}
        for i, name in enumerate(names):
            key = f"t{i:04d}"
            if key not in f.keys():
                raise ValueError(f"{path}: tensor {key!r} of instruction {name!r} is missing")
            t = f.get_tensor(key)
            if tuple(t.shape) != (1, max_tokens, dim):
                raise ValueError(f"{path}: embedding of {name!r} has shape {tuple(t.shape)}, "
                                 f"expected (1, {max_tokens}, {dim})")
            out[name] = t
    return out
