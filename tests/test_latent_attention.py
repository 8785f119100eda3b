"""MLA with decoupled RoPE: absorbed equals expanded, it equals transformers'
DeepseekV3Attention, and absorbing W_uk with RoPE on the content keys is wrong."""

from __future__ import annotations

import pytest
import torch

from pe_tutorial.attention.latent_attention import (
    LatentAttention,
    coupled_absorption_error,
)

SIZES = dict(q_rank=24, kv_rank=16, nope_dim=8, rope_dim=4, v_dim=6)


def layer(seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return LatentAttention(32, 4, **SIZES).to(dtype)


def test_absorbed_equals_expanded():
    mla = layer()
    x = torch.randn(2, 11, 32, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(mla(x, absorbed=True), mla(x), atol=1e-10)


def test_decoupled_rope_makes_the_layer_relative():
    mla = layer(1)
    x = torch.randn(1, 9, 32, dtype=torch.float64)
    positions = torch.arange(9)
    with torch.no_grad():
        moved = mla(x, positions + 1000, absorbed=True)
        assert torch.allclose(moved, mla(x, positions, absorbed=True), atol=1e-5)


def test_absorbing_with_rope_on_the_content_keys_is_wrong():
    mla = layer(2)
    x = torch.randn(1, 9, 32, dtype=torch.float64)
    with torch.no_grad():
        assert coupled_absorption_error(mla, x) > 0.1
        # with every token at position 0 the rotation is the identity
        assert (
            coupled_absorption_error(mla, x, torch.zeros(9, dtype=torch.long))
            < 1e-6  # the float32 that apply_rope rotates in
        )


def test_the_cache_holds_the_latent_and_one_rotated_key():
    mla = layer()
    assert mla.cache_size() == SIZES["kv_rank"] + SIZES["rope_dim"]
    x = torch.randn(1, 5, 32, dtype=torch.float64)
    c, k_rope = mla.latents(x, torch.arange(5))
    assert c.shape == (1, 5, 16) and k_rope.shape == (1, 5, 4)


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="rope_dim must be even"):
        LatentAttention(32, 4, **{**SIZES, "rope_dim": 3})
    with pytest.raises(ValueError, match="num_heads"):
        LatentAttention(32, 0, **SIZES)
    with pytest.raises(ValueError, match=r"\(batch, T, d_model\)"):
        layer()(torch.randn(5, 32, dtype=torch.float64))


def test_equals_transformers_deepseek_v3_attention():
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf

    config = transformers.DeepseekV3Config(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=4,
        q_lora_rank=SIZES["q_rank"],
        kv_lora_rank=SIZES["kv_rank"],
        qk_nope_head_dim=SIZES["nope_dim"],
        qk_rope_head_dim=SIZES["rope_dim"],
        v_head_dim=SIZES["v_dim"],
        rope_interleave=True,
        rms_norm_eps=1e-6,
        attention_bias=False,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(3)
    reference = hf.DeepseekV3Attention(config, layer_idx=0).double().eval()
    for p in reference.parameters():  # RMSNorm weights start at 1: move them
        torch.nn.init.normal_(p, mean=1.0 if p.dim() == 1 else 0.0, std=0.2)
    ours = LatentAttention(32, 4, **SIZES).double()
    ours.load_state_dict(reference.state_dict())
    T = 7
    x = torch.randn(2, T, 32, dtype=torch.float64)
    positions = torch.arange(T)[None].expand(2, T)
    cos, sin = hf.DeepseekV3RotaryEmbedding(config)(x, positions)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        expected, _ = reference(x, (cos, sin), mask.expand(2, 1, T, T))
        assert torch.allclose(ours(x), expected, atol=1e-5)
        assert torch.allclose(ours(x, absorbed=True), expected, atol=1e-5)


def test_a_decoding_step_is_the_last_row_of_the_whole_sequence():
    mla = layer(4)
    x = torch.randn(1, 10, 32, dtype=torch.float64)
    with torch.no_grad():
        c, k_rope = mla.latents(x, torch.arange(10))
        whole = mla(x)
        for absorbed in (False, True):
            step = mla.decode(x[:, -1:], c, k_rope, absorbed=absorbed)
            assert torch.allclose(step, whole[:, -1:], atol=1e-10)


def interleaved_rope_by_hand(x: torch.Tensor, positions: list[int], base: float):
    """RoPE on interleaved pairs (2i, 2i + 1), float64, turned by ``t * base **
    (-2i / D)`` at each token's position t (DeepSeek's pairing)."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angle = torch.tensor(positions, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * angle.cos() - b * angle.sin()
    out[..., 1::2] = a * angle.sin() + b * angle.cos()
    return out


@pytest.mark.parametrize("where", ["all at 7", "all at 0", "0 .. T - 1", "scattered"])
def test_the_coupled_absorption_error_by_hand(where):
    """Issue 32: ``coupled_absorption_error`` is the largest gap between the scores
    with the content keys rotated, ``(R_m q_h) . (R_n k_h)``, and the absorbed ones,
    ``(R_m q_h) . k_h``, with ``k_h = c W_uk_h`` and ``R`` DeepSeek's interleaved
    RoPE, written out here. Every token at one *nonzero* position: the rotations
    cancel in the coupled score but not in the absorbed one, so the error is
    clearly positive (a version that also left the absorbed query unrotated
    would give 0 there); every token at 0: zero, to float tolerance."""
    positions = {
        "all at 7": [7] * 9,
        "all at 0": [0] * 9,
        "0 .. T - 1": list(range(9)),
        "scattered": [0, 3, 3, 10, 11, 40, 41, 41, 100],
    }[where]
    mla = layer(4)
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    with torch.no_grad():
        error = coupled_absorption_error(mla, x, torch.tensor(positions))
        q = mla.q_b_proj(mla.q_a_layernorm(mla.q_a_proj(x)))
        q_nope = q.view(2, 9, 4, 12).transpose(1, 2)[..., :8]  # (B, H, T, nope_dim)
        c = mla.kv_a_layernorm(mla.kv_a_proj_with_mqa(x)[..., :16])  # (B, T, kv_rank)
        w_uk = mla.kv_b_proj.weight.view(4, 14, 16)[:, :8]  # (H, nope_dim, kv_rank)
        k_nope = torch.einsum("btr,hdr->bhtd", c, w_uk)
        q_turned = interleaved_rope_by_hand(q_nope, positions, 10000.0)
        k_turned = interleaved_rope_by_hand(k_nope, positions, 10000.0)
        coupled = q_turned @ k_turned.transpose(-1, -2)
        absorbed = q_turned @ k_nope.transpose(-1, -2)
    expected = float((coupled - absorbed).abs().max())
    # apply_rope turns in float32: ~1e-7 relative on scores of size ~1
    assert error == pytest.approx(expected, abs=1e-5)
    if where == "all at 0":
        assert error < 1e-6
    else:
        assert expected > 0.05 and error > 0.05  # far above float noise
