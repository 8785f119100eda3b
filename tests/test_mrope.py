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
    with pytest.raises(ValueError, match="'text', 'image' or 'video'"):
        mrope_position_ids([("audio", 3)])


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


def rope_index_model(model_class, **vision):
    """The least of a Qwen-VL model that ``get_rope_index`` reads: the vision
    config (merge size 2, and ``vision``) and the ``get_vision_position_ids`` helper."""
    model = types.SimpleNamespace(
        config=types.SimpleNamespace(
            vision_config=types.SimpleNamespace(spatial_merge_size=2, **vision)
        )
    )
    model.get_vision_position_ids = types.MethodType(
        model_class.get_vision_position_ids, model
    )
    return model


def test_position_ids_equal_qwen2_vl_get_rope_index():
    _, hf = qwen2_vl()
    model = rope_index_model(hf.Qwen2VLModel)
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


# --- video segments ----------------------------------------------------------------


def test_position_ids_of_text_a_video_and_text():
    segments = [("text", 2), ("video", (3, 1, 2)), ("text", 2)]
    ids = mrope_position_ids(segments)
    # the video at n = 2: frame f has t = 2 + f, h = 2 + row, w = 2 + column;
    # text resumes one past the largest id, 2 + 3 = 5 (Qwen's released code)
    assert ids.tolist() == [
        [0, 1, 2, 2, 3, 3, 4, 4, 5, 6],
        [0, 1, 2, 2, 2, 2, 2, 2, 5, 6],
        [0, 1, 2, 3, 2, 3, 2, 3, 5, 6],
    ]
    # transformers 5 resumes at 2 + max(1, 2) = 4, the last frame's own t
    spatial = mrope_position_ids(segments, text_resumes="spatial")
    assert spatial[:, :8].equal(ids[:, :8])
    assert spatial[:, 8:].tolist() == [[4, 5]] * 3
    # after an image the two rules agree, wide or tall: text at 2 + max(rows, columns)
    for grid in ((2, 3), (3, 2)):
        image = [("text", 2), ("image", grid), ("text", 2)]
        spatial = mrope_position_ids(image, text_resumes="spatial")
        assert mrope_position_ids(image).equal(spatial)
        assert spatial[:, -2:].tolist() == [[5, 6]] * 3


def test_time_tied_ids_of_qwen2_5_vl_docstring_example():
    """The example of Qwen2.5-VL's get_rope_index (transformers PR #35569): 3 temporal
    patches of 2 x 2, 25 tokens per second, 2 frames per patch at 1 fps (2 s a patch):
    t = 0, 50, 100; the released code then starts the text at 101."""
    segments = [("video", (3, 2, 2)), ("text", 5)]
    ids = mrope_position_ids(
        segments, tokens_per_second=25, seconds_per_frame=[2.0], text_resumes="past_max"
    )
    assert ids[0].tolist() == [0] * 4 + [50] * 4 + [100] * 4 + [101, 102, 103, 104, 105]
    assert ids[1].tolist() == [0, 0, 1, 1] * 3 + [101, 102, 103, 104, 105]
    assert ids[2].tolist() == [0, 1, 0, 1] * 3 + [101, 102, 103, 104, 105]


def hf_ids(model_class, model, segments, **extra):
    """transformers' get_rope_index on the token types the segments make, (3, T).

    Grids are given before the 2 x 2 merge, as a processor gives them."""
    types_, images, videos = [], [], []
    for kind, size in segments:
        if kind == "text":
            types_ += [0] * size
        elif kind == "image":
            types_ += [1] * (size[0] * size[1])
            images.append([1, 2 * size[0], 2 * size[1]])
        else:
            types_ += [2] * (size[0] * size[1] * size[2])
            videos.append([size[0], 2 * size[1], 2 * size[2]])
    ids, _ = model_class.get_rope_index(
        model,
        torch.zeros(1, len(types_), dtype=torch.long),
        torch.tensor([types_]),
        image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor(videos) if videos else None,
        **extra,
    )
    return ids[:, 0]


MIXED = [
    ("text", 3),
    ("video", (4, 2, 3)),  # more frames than rows or columns
    ("text", 2),
    ("image", (3, 4)),
    ("video", (2, 3, 3)),
    ("text", 1),
    ("video", (7, 1, 1)),
    ("text", 4),
]


def test_video_position_ids_equal_qwen2_vl_get_rope_index():
    _, hf = qwen2_vl()
    model = rope_index_model(hf.Qwen2VLModel)
    for segments in (MIXED, MIXED[1:], [("video", (3, 2, 2)), ("text", 2)]):
        expected = hf_ids(hf.Qwen2VLModel, model, segments)
        ours = mrope_position_ids(segments, text_resumes="spatial")
        assert torch.equal(ours, expected)


@pytest.mark.parametrize(
    "rate, seconds",
    [
        (2, [1.0, 0.5, 0.75]),
        (2, [2.0, 1 / 3, 0.1]),
        (25, [0.08, 1.5, 1.0]),
        # float32 arithmetic: frame 5 of the third video gets floor(5 * 3 * 1.8)
        # = 26, not 27, because float32(1.8) * 3 is just below 5.4
        (3, [0.9, 0.5, 1.8]),
    ],
)
def test_time_tied_position_ids_equal_qwen2_5_vl_get_rope_index(rate, seconds):
    pytest.importorskip("transformers")
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as hf

    model = rope_index_model(hf.Qwen2_5_VLModel, tokens_per_second=rate)
    expected = hf_ids(
        hf.Qwen2_5_VLModel, model, MIXED, second_per_grid_ts=torch.tensor(seconds)
    )
    ours = mrope_position_ids(
        MIXED, tokens_per_second=rate, seconds_per_frame=seconds, text_resumes="spatial"
    )
    assert torch.equal(ours, expected)
    # Qwen2-VL's frame index is not this (the time ids differ, h and w do not)
    frames = mrope_position_ids(MIXED, text_resumes="spatial")
    assert not torch.equal(frames[0], ours[0]) and torch.equal(frames[1:], ours[1:])


def test_bad_video_segments_are_named():
    with pytest.raises(
        ValueError, match=r"a video segment needs \(frames, rows, columns\)"
    ):
        mrope_position_ids([("video", (2, 3))])
    with pytest.raises(ValueError, match="a video's frames must be a positive integer"):
        mrope_position_ids([("video", (0, 2, 3))])
    with pytest.raises(
        ValueError, match="seconds_per_frame has 1 values but there are 2"
    ):
        mrope_position_ids(
            [("video", (2, 2, 2)), ("video", (2, 2, 2))],
            tokens_per_second=2,
            seconds_per_frame=[1.0],
        )
    with pytest.raises(ValueError, match="only with tokens_per_second"):
        mrope_position_ids([("video", (2, 2, 2))], seconds_per_frame=[1.0])
    with pytest.raises(ValueError, match="tokens_per_second must be a positive"):
        mrope_position_ids([("video", (2, 2, 2))], tokens_per_second=0)
    with pytest.raises(ValueError, match="seconds_per_frame must be positive"):
        mrope_position_ids(
            [("video", (2, 2, 2))], tokens_per_second=2, seconds_per_frame=[-1.0]
        )
    with pytest.raises(ValueError, match="text_resumes must be 'past_max'"):
        mrope_position_ids([("text", 2)], text_resumes="max")
