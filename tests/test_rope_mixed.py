"""RoPE-Mixed: relative in 2-D, axial RoPE as a special case, and a direction of its own."""

from __future__ import annotations

import pytest
import torch

from pe_tutorial.encodings.rope import apply_rope, grid_positions
from pe_tutorial.encodings.rope_core import rope_frequencies
from pe_tutorial.encodings.rope_mixed import MixedRoPE2d


def test_with_no_y_frequencies_it_is_rope_along_x():
    mixed = MixedRoPE2d(16)
    with torch.no_grad():
        mixed.frequencies[0] = rope_frequencies(16)
        mixed.frequencies[1] = 0.0
        x = torch.randn(2, 12, 16)
        xy = torch.stack([torch.arange(12), torch.randint(0, 50, (12,))], -1)
        assert torch.allclose(mixed(x, xy), apply_rope(x, torch.arange(12)), atol=1e-5)


def test_the_score_depends_only_on_the_offset_in_the_plane():
    torch.manual_seed(0)
    mixed = MixedRoPE2d(32, seed=1)
    q, k = torch.randn(2, 1, 32)

    def score(a, b):
        with torch.no_grad():
            qa = mixed(q, torch.tensor([a]))
            kb = mixed(k, torch.tensor([b]))
        return float(qa @ kb.T)

    assert score((3, 4), (5, 1)) == pytest.approx(score((13, 24), (15, 21)), abs=1e-4)
    assert score((3, 4), (5, 1)) != pytest.approx(score((3, 4), (1, 5)), abs=1e-3)


def test_a_pair_can_point_along_a_diagonal():
    # one pair with frequency along (1, 1): offsets across that diagonal leave it still
    mixed = MixedRoPE2d(2)
    with torch.no_grad():
        mixed.frequencies.copy_(torch.tensor([[0.5], [0.5]]))
        q = torch.tensor([[1.0, 0.0]])
        grid = grid_positions(5, 5)
        rotated = mixed(q.expand(25, 2), grid)
    same_diagonal = grid.sum(-1) == 4  # x + y = 4: one angle
    assert torch.allclose(rotated[same_diagonal], rotated[same_diagonal][0])
    assert not torch.allclose(rotated[grid.sum(-1) == 3][0], rotated[same_diagonal][0])


def test_frequencies_are_learned_and_bad_input_is_named():
    mixed = MixedRoPE2d(8)
    out = mixed(torch.randn(4, 8), torch.randint(0, 9, (4, 2)))
    out.sum().backward()
    assert mixed.frequencies.grad is not None and mixed.frequencies.shape == (2, 4)
    with pytest.raises(ValueError, match="head_dim must be even"):
        MixedRoPE2d(7)
    with pytest.raises(ValueError, match=r"\(\.\.\., T, 2\)"):
        mixed(torch.randn(4, 8), torch.zeros(4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="integer tensor"):
        mixed(torch.randn(4, 8), torch.zeros(4, 2))


@pytest.mark.parametrize("base, seed", [(None, 0), (None, 3), (37.0, 1)])
def test_it_starts_at_ropes_magnitudes_in_random_directions(base, seed):
    """Issue 32: as built, before any training or test writes to it, pair i's
    frequency vector ``(theta_i^x, theta_i^y)`` has RoPE's magnitude ``base **
    (-2i / D)`` with the docstring's default ``base = 100`` (or the given one),
    in a direction drawn from ``seed``: different seeds, different directions,
    the same magnitudes."""
    D = 16
    options = {} if base is None else {"base": base}
    b = 100.0 if base is None else base
    expected = [b ** (-2 * i / D) for i in range(D // 2)]
    fx, fy = MixedRoPE2d(D, seed=seed, **options).frequencies.detach().double()
    gx, gy = MixedRoPE2d(D, seed=seed + 1, **options).frequencies.detach().double()
    assert torch.hypot(fx, fy).tolist() == pytest.approx(expected, rel=1e-6)
    assert torch.hypot(gx, gy).tolist() == pytest.approx(expected, rel=1e-6)
    # the directions are the seed's: not all along one axis, and another seed's differ
    angles = torch.atan2(fy, fx)
    assert angles.std() > 0.5
    assert not torch.allclose(angles, torch.atan2(gy, gx), atol=1e-3)
