"""FAVOR+ (performer): unbiased for the softmax kernel, and converging to softmax
attention, with and without RoPE, as the number of random features grows."""

from __future__ import annotations

import math

import pytest
import torch

from pe_tutorial.attention.core import dot_product_attention
from pe_tutorial.attention.performer import (
    favor_features,
    performer_attention,
    random_directions,
)
from pe_tutorial.encodings.rope import apply_rope


def inputs(seed=0, T=24, D=16, scale=0.5):
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(2, T, D, generator=generator, dtype=torch.float64) * scale
        for _ in range(3)
    )
    return q, k, v


def test_the_features_estimate_the_softmax_kernel_without_bias():
    x = torch.tensor([[0.3, -0.2, 0.5, 0.1]], dtype=torch.float64)
    y = torch.tensor([[-0.1, 0.4, 0.2, -0.3]], dtype=torch.float64)
    exact = math.exp(float(x @ y.T))
    # the mean over many independent draws of phi(x) . phi(y)
    estimates = []
    for seed in range(400):
        w = random_directions(64, 4, seed=seed, dtype=torch.float64)
        # no stabiliser: c = 0 (subtract nothing) keeps the estimate's scale
        phi_x = torch.exp(x @ w.T - 0.5 * (x * x).sum()) / math.sqrt(64)
        phi_y = torch.exp(y @ w.T - 0.5 * (y * y).sum()) / math.sqrt(64)
        estimates.append(float(phi_x @ phi_y.T))
    mean = sum(estimates) / len(estimates)
    assert mean == pytest.approx(exact, rel=0.01)


def test_orthogonal_directions_are_orthogonal_in_blocks_and_gaussian_in_length():
    w = random_directions(32, 8, seed=1, dtype=torch.float64)
    block = w[:8] / w[:8].norm(dim=-1, keepdim=True)
    assert torch.allclose(
        block @ block.T, torch.eye(8, dtype=torch.float64), atol=1e-10
    )
    lengths = random_directions(4096, 8, seed=2, dtype=torch.float64).norm(dim=-1)
    # |N(0, I_8)|^2 is chi-square with 8 degrees of freedom: mean 8
    assert float((lengths**2).mean()) == pytest.approx(8, rel=0.05)


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_performer_converges_to_softmax_attention(rope, causal):
    q, k, v = inputs()
    T = q.shape[-2]
    mask = torch.ones(T, T, dtype=torch.bool).tril() if causal else None
    q_exact, k_exact = (apply_rope(q), apply_rope(k)) if rope else (q, k)
    exact = dot_product_attention(q_exact, k_exact, v, mask=mask)
    errors = []
    for m in (16, 256, 4096):
        approx = performer_attention(
            q, k, v, num_features=m, rope=rope, causal=causal, seed=3
        )
        errors.append(float((approx - exact).abs().mean()))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.02


def test_rope_goes_in_before_the_features():
    # RoPE on the features instead (RoFormer's linear-attention way) estimates
    # something else: the rotated features are no longer the softmax kernel's
    q, k, v = inputs(seed=4)
    exact = dot_product_attention(apply_rope(q), apply_rope(k), v)
    before = performer_attention(q, k, v, num_features=4096, rope=True, seed=5)
    w = random_directions(4096, 16, seed=5, dtype=torch.float64)
    phi_q = favor_features(q * 16**-0.25, w, stabilise="row")
    phi_k = favor_features(k * 16**-0.25, w, stabilise="all")
    after_q, after_k = apply_rope(phi_q), apply_rope(phi_k)
    after = (after_q @ after_k.transpose(-1, -2)) @ v
    after = after / (after_q @ after_k.transpose(-1, -2)).sum(-1, keepdim=True)
    assert float((before - exact).abs().mean()) < 0.02
    assert float((after - exact).abs().mean()) > 5 * float(
        (before - exact).abs().mean()
    )


def test_with_rope_a_shift_of_every_position_turns_the_directions():
    # R_(m+s) = R_s R_m, so w . R_(m+s) q = (R_s^T w) . R_m q: moving every position
    # by s is the same draw with every direction turned by R_s^T = R_(-s) (up to
    # the float32 angles apply_rope computes)
    q, k, v = inputs(seed=6)
    T, s = q.shape[-2], 500
    positions = torch.arange(T)
    w = random_directions(64, 16, seed=7, dtype=torch.float64)
    moved = performer_attention(
        q,
        k,
        v,
        directions=w,
        rope=True,
        q_positions=positions + s,
        k_positions=positions + s,
    )
    turned = apply_rope(w, torch.full((64,), -s))
    assert torch.allclose(
        moved, performer_attention(q, k, v, directions=turned, rope=True), atol=1e-5
    )
    # one draw is not shift-invariant, but the turned directions are as random
    # as the first ones: both estimates are as close to RoPE's softmax attention
    out = performer_attention(q, k, v, directions=w, rope=True)
    exact = dot_product_attention(apply_rope(q), apply_rope(k), v)
    assert not torch.allclose(out, moved, atol=1e-3)
    assert float((moved - exact).abs().mean()) < 2 * float((out - exact).abs().mean())


def test_the_stabiliser_cancels():
    q, k, v = inputs(seed=8, scale=3.0)  # large scores: exp would overflow in float32
    out = performer_attention(q.float(), k.float(), v.float(), num_features=512)
    assert torch.isfinite(out).all()
    reference = performer_attention(q, k, v, num_features=512)
    assert torch.allclose(out.double(), reference, atol=1e-4)


def test_bad_inputs_are_named():
    q, k, v = inputs()
    with pytest.raises(ValueError, match="num_features"):
        performer_attention(q, k, v, num_features=0)
    with pytest.raises(ValueError, match="not both and not neither"):
        performer_attention(q, k, v)
    with pytest.raises(ValueError, match="do not fit"):
        performer_attention(q, k[..., :8], v, num_features=8)
    with pytest.raises(ValueError, match="as many queries as keys"):
        performer_attention(q[:, :5], k, v, num_features=8, causal=True)
    with pytest.raises(ValueError, match="stabilise"):
        favor_features(q, random_directions(4, 16), stabilise="none")
    with pytest.raises(ValueError, match="dim=16"):
        favor_features(q, random_directions(4, 8), stabilise="row")
