"""The Qwen2.5-VL prompt embedding as Cosmos-Predict2.5's pipeline computes it, and the action
head initialised from pi0's Gemma expert, each checked against the library's own code."""
from __future__ import annotations

import types

import pytest
import torch
from safetensors.torch import save_file

from vam_model.foundation import FoundationError
from vam_model.networks.action_head import ActionHead
from vam_model.networks.config import HeadConfig
from vam_model.networks.text_encoder import TextEncoder
from vam_model.pi0_head import EXPERT, load_pi0_head

# Qwen's chat layout: <|im_start|>role\ncontent<|im_end|>\n per message
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                 "{% for c in m['content'] %}{{ c['text'] }}{% endfor %}<|im_end|>\n{% endfor %}")


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory):
    """A Qwen2.5-VL folder as transformers writes it: config, weights, tokenizer with a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    folder = tmp_path_factory.mktemp("qwen")
    words = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "[UNK]", "\n"] + \
        "you are a helpful assistant who will provide prompts to an image generator . system user pick up " \
        "the bowl and place it on plate put cream cheese in basket".split()
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split("\n", "isolated"),
                                                 pre_tokenizers.WhitespaceSplit()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", unk_token="[UNK]",
                                   additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    config = Qwen2_5_VLConfig(
        text_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=64, bos_token_id=None, eos_token_id=None,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32,
                           fullatt_block_indexes=[0]))
    torch.manual_seed(0)
    Qwen2_5_VLForConditionalGeneration(config).save_pretrained(folder)
    return folder


def test_qwen_embedding_is_the_cosmos_pipelines(tiny_qwen):
    from diffusers import Cosmos2_5_PredictBasePipeline
    from transformers import AutoTokenizer, Qwen2_5_VLForConditionalGeneration

    enc = TextEncoder(str(tiny_qwen), max_tokens=40, expected_dim=3 * 32)
    assert enc.recipe == "cosmos"
    pipe = types.SimpleNamespace(tokenizer=AutoTokenizer.from_pretrained(tiny_qwen),
                                 text_encoder=Qwen2_5_VLForConditionalGeneration.from_pretrained(tiny_qwen).eval(),
                                 _execution_device=torch.device("cpu"))
    for text in ("pick up the bowl", "put the cream cheese in the basket"):
        got = enc.encode(text)
        with torch.no_grad():
            want = Cosmos2_5_PredictBasePipeline._get_prompt_embeds(pipe, text, max_sequence_length=40,
                                                                    dtype=torch.float32)
        assert got.shape == want.shape == (1, 40, 96)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        assert got[0, -1].abs().sum() > 0                                # padding positions are kept, not zeroed
    assert not torch.equal(enc.encode("pick up the bowl"), enc.encode("put the cream cheese in the basket"))


def test_a_long_instruction_is_cut_to_the_window_and_logged(tiny_qwen, caplog):
    enc = TextEncoder(str(tiny_qwen), max_tokens=24, expected_dim=96)
    with caplog.at_level("WARNING"):
        emb = enc.encode("pick up the bowl and place it on the plate " * 3)
    assert emb.shape == (1, 24, 96) and "window of 24" in caplog.text


def test_an_encoder_of_the_wrong_width_is_refused(tiny_qwen):
    with pytest.raises(ValueError, match=r"3 layers x 32 = 96 .* dit.text_in_dim=100352"):
        TextEncoder(str(tiny_qwen), max_tokens=40, expected_dim=100352)


# ---- pi0's Gemma expert -> the action head ------------------------------------------------------
HEAD = HeadConfig(layers=2, width=64, heads=2, kv_heads=1, head_dim=32, mlp_dim=128, internal_dim=32,
                  fourier_dim=16, tr_layer=1)


def gemma_expert():
    from transformers import GemmaConfig, GemmaModel

    torch.manual_seed(3)
    model = GemmaModel(GemmaConfig(vocab_size=8, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                                   hidden_activation="gelu_pytorch_tanh", rope_theta=10000.0))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0, 0.3)                                      # Gemma norms start at 0 (1 + w)
    return model.eval()


def pi0_file(path, expert, prefix="model.", extra=None):
    """pi0 weights in lerobot's key layout (openpi's has no 'model.' prefix)."""
    torch.manual_seed(4)
    state = {f"{prefix}{EXPERT}{k}": v.clone() for k, v in expert.state_dict().items() if "embed_tokens" not in k}
    for name, (o, i) in {"state_proj": (64, 32), "action_in_proj": (64, 32), "action_out_proj": (32, 64)}.items():
        state[f"{prefix}{name}.weight"], state[f"{prefix}{name}.bias"] = torch.randn(o, i), torch.randn(o)
    state[f"{prefix}action_time_mlp_in.weight"] = torch.randn(64, 128)
    state[f"{prefix}paligemma_with_expert.paligemma.model.language_model.norm.weight"] = torch.randn(64)
    state.update(extra or {})
    save_file(state, str(path))
    return state


def test_pi0_expert_layers_compute_what_gemma_computes(tmp_path):
    expert = gemma_expert()
    state = pi0_file(tmp_path / "model.safetensors", expert)
    head = ActionHead(HEAD, dit_width=16, action_dim=7, proprio_dim=7).eval()
    report = load_pi0_head(tmp_path / "model.safetensors", head)
    assert report["mapped"] == 2 * 8 + 1 + 6 and report["pi0_time_mlp_dropped"] == ["action_time_mlp_in.weight"]
    assert torch.equal(head.state_proj.weight, state["model.state_proj.weight"])
    assert torch.equal(head.action_out.bias, state["model.action_out_proj.bias"])
    x = torch.randn(1, 6, 64, generator=torch.Generator().manual_seed(5))
    from vam_model.networks.action_head import rope_tables

    rope = rope_tables(torch.arange(6), 32, 10000.0)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    with torch.no_grad():
        h = x
        for layer in head.layers:                                        # cond None: the adaptive parts are off
            q, k, v = layer.qkv(h, None, rope)
            out, _ = layer.attend(q, k, v, causal, False)
            h = layer.finish(h, out, None)
        got, _ = head.final_norm(h)
        want = expert(inputs_embeds=x).last_hidden_state                 # embeddings given: no sqrt(width) scaling
    assert want.abs().max() > 0.1
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    # zero-initialised modulation: with any sigma_a the expert's function is unchanged at import
    cond = torch.randn(1, 64)
    assert torch.equal(head.layers[0].attn_norm(x, cond)[0], head.layers[0].attn_norm(x)[0])


def test_pi0_files_that_do_not_fit_are_named(tmp_path):
    expert = gemma_expert()
    pi0_file(tmp_path / "p05.safetensors", expert, extra={
        f"{EXPERT}layers.0.input_layernorm.dense.weight": torch.zeros(192, 64)})
    head = ActionHead(HEAD, dit_width=16, action_dim=7, proprio_dim=7)
    with pytest.raises(FoundationError, match="pi0.5"):
        load_pi0_head(tmp_path / "p05.safetensors", head)
    deep = ActionHead(HeadConfig(**{**HEAD.__dict__, "layers": 3, "tr_layer": 1}), 16, 7, 7)
    pi0_file(tmp_path / "ok.safetensors", expert, prefix="")
    with pytest.raises(FoundationError, match=r"no pi0 counterpart, e.g. head.layers.2"):
        load_pi0_head(tmp_path / "ok.safetensors", deep)
    wide = ActionHead(HeadConfig(**{**HEAD.__dict__, "mlp_dim": 256}), 16, 7, 7)
    with pytest.raises(FoundationError, match=r"head.layers.0.gate_up.weight \[256, 64\] \(pi0\) vs \[512, 64\]"):
        load_pi0_head(tmp_path / "ok.safetensors", wide)
    save_file({"vision.weight": torch.zeros(2)}, str(tmp_path / "none.safetensors"))
    with pytest.raises(FoundationError, match="no pi0 action-expert keys"):
        load_pi0_head(tmp_path / "none.safetensors", head)
