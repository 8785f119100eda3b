"""M-RoPE (Qwen2-VL): RoPE for text, three axes for image patches, and the same
numbers as transformers' Qwen2-VL rotary embedding and position ids."""

from __future__ import annotations

import types

import pytest
import torch

from pe_tutorial.encodings.mrope import (
    QWEN2_VL_SECTIONS,
    apply_mrope,
    mrope_cos_sin,
    mrope_position_ids,
)
from pe_tutorial.encodings.rope import apply_rope


def test_for_text_m_rope_is_rope():
    x = torch.randn(2, 4, 10, 128)
    ids = mrope_position_ids([("text", 10)])
    assert torch.equal(ids, torch.arange(10).expand(3, 10))
    assert torch.allclose(apply_mrope(x, ids), apply_rope(x), atol=1e-6)


def test_position_ids_of_text_an_image_and_text():
    ids = mrope_position_ids([("text", 2), ("image", (2, 3)), ("text", 2)])
    # the image at n = 2: t = 2, h = 2 + row, w = 2 + column; text resumes at 2 + 3
    assert ids.tolist() == [
        [0, 1, 2, 2, 2, 2, 2, 2, 5, 6],
        [0, 1, 2, 2, 2, 3, 3, 3, 5, 6],
        [0, 1, 2, 3, 4, 2, 3, 4, 5, 6],
    ]


def test_each_section_turns_with_its_own_axis_written_out():
    head_dim, sections = 12, (1, 2, 3)
    ids = torch.tensor([[3], [5], [7]])  # one token at t = 3, h = 5, w = 7
    cos, _ = mrope_cos_sin(ids, head_dim, sections=sections)
    theta = [10000.0 ** (-2 * i / head_dim) for i in range(6)]
    axis_of_pair = [0, 1, 1, 2, 2, 2]
    expected = [
        torch.cos(torch.tensor(float(ids[a, 0]) * t))
        for a, t in zip(axis_of_pair, theta)
    ]
    assert torch.allclose(cos[0], torch.stack(expected), atol=1e-6)


def test_the_score_of_two_patches_depends_on_their_offset_along_each_axis():
    torch.manual_seed(0)
    q, k = torch.randn(2, 1, 128)
    sections = QWEN2_VL_SECTIONS

    def score(a, b):
        qa = apply_mrope(q, torch.tensor(a).view(3, 1), sections=sections)
        kb = apply_mrope(k, torch.tensor(b).view(3, 1), sections=sections)
        return float(qa @ kb.T)

    base = score((4, 1, 2), (4, 3, 5))
    assert score((9, 6, 7), (9, 8, 10)) == pytest.approx(base, abs=1e-4)
    assert score((4, 1, 2), (4, 5, 3)) != pytest.approx(base, abs=1e-2)


def test_bad_sections_and_position_ids_are_named():
    x = torch.randn(1, 5, 64)
    ids = torch.zeros(3, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="must sum to half the head dimension"):
        apply_mrope(x, ids, sections=(16, 24, 24))
    with pytest.raises(ValueError, match="three positive integers"):
        apply_mrope(x, ids, sections=(16, 16))
    with pytest.raises(ValueError, match=r"\(3, \.\.\., T\)"):
        mrope_cos_sin(torch.zeros(2, 5, dtype=torch.long), 64, sections=(8, 12, 12))
    with pytest.raises(ValueError, match="one \\(t, h, w\\) per token"):
        apply_mrope(x, torch.zeros(3, 4, dtype=torch.long), sections=(8, 12, 12))
    with pytest.raises(ValueError, match="'text' or 'image'"):
        mrope_position_ids([("video", 3)])


# --- against transformers' Qwen2-VL ------------------------------------------------


def qwen2_vl():
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen2_vl import modeling_qwen2_vl

    return transformers, modeling_qwen2_vl


def test_rotation_equals_qwen2_vl_rotary_embedding():
    transformers, hf = qwen2_vl()
    config = transformers.Qwen2VLTextConfig(
        hidden_size=256,
        num_attention_heads=2,
        num_key_value_heads=2,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": list(QWEN2_VL_SECTIONS),
        },
    )
    rotary = hf.Qwen2VLRotaryEmbedding(config)
    ids = mrope_position_ids([("text", 3), ("image", (3, 4)), ("text", 5)])
    batch_ids = ids[:, None, :]  # (3, batch 1, T)
    q, k = torch.randn(2, 1, 2, ids.shape[-1], 128)
    cos, sin = rotary(q, batch_ids)
    hf_q, hf_k = hf.apply_rotary_pos_emb(q, k, cos, sin)
    ours_q = apply_mrope(q, batch_ids[:, :, None, :])  # (3, batch, heads 1, T)
    ours_k = apply_mrope(k, batch_ids[:, :, None, :])
    assert torch.allclose(ours_q, hf_q, atol=1e-5)
    assert torch.allclose(ours_k, hf_k, atol=1e-5)


def test_position_ids_equal_qwen2_vl_get_rope_index():
    _, hf = qwen2_vl()
    # get_rope_index reads only the vision config's merge size and one helper
    model = types.SimpleNamespace(
        config=types.SimpleNamespace(
            vision_config=types.SimpleNamespace(spatial_merge_size=2)
        )
    )
    model.get_vision_position_ids = types.MethodType(
        hf.Qwen2VLModel.get_vision_position_ids, model
    )
    # text, an image of 6 x 8 patches (3 x 4 after merging 2 x 2), text, an
    # image of 4 x 2 patches (2 x 1), text
    types_ = [0] * 4 + [1] * 12 + [0] * 3 + [1] * 2 + [0] * 2
    input_ids = torch.zeros(1, len(types_), dtype=torch.long)
    grids = torch.tensor([[1, 6, 8], [1, 4, 2]])
    hf_ids, _ = hf.Qwen2VLModel.get_rope_index(
        model, input_ids, torch.tensor([types_]), image_grid_thw=grids
    )
    ours = mrope_position_ids(
        [("text", 4), ("image", (3, 4)), ("text", 3), ("image", (2, 1)), ("text", 2)]
    )
    assert torch.equal(hf_ids[:, 0], ours)
