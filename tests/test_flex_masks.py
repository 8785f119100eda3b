"""FlexAttention with block masks and compiled: pe_tutorial.attention.core's fast bias path.

Eager FlexAttention evaluates the ``mask_mod`` on every score and ignores the
block tables, so the tables are checked on their own: against a closed-form
count of the tiles a causal mask leaves, and against ``create_block_mask``.
The one compiled run (CPU, where TorchInductor supports it) is the only test
in which the tables decide what is computed.
"""

import math

import pytest
import torch

from pe_tutorial.attention import core as attention
from pe_tutorial.attention import flex
from pe_tutorial.attention.core import (
    attend,
    compile_flex,
    flex_available,
    flex_block_mask,
    flex_compile_available,
    padding_mask,
)
from pe_tutorial.attention.schemes import ALiBiScheme, T5BiasScheme
from pe_tutorial.encodings.alibi import ALiBiBias
from pe_tutorial.encodings.relative import T5RelativeBias

from reference import scheme_attention, softmax_attention

pytestmark = pytest.mark.skipif(
    not flex_available(), reason="this torch has no FlexAttention"
)

B, H, D = 2, 2, 8


def qkv(q_len, k_len, seed=0, heads=H):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, heads, n, D, generator=g) for n in (q_len, k_len, k_len)]


def visibility(q_len, k_len, *, causal, key_lengths=None, query_lengths=None):
    """(B, 1, Tq, Tk) boolean, row by row: row r sits at i = k_len - q_len + r."""
    visible = torch.zeros(B, 1, q_len, k_len, dtype=torch.bool)
    for b in range(B):
        for r in range(q_len):
            i = k_len - q_len + r
            if query_lengths is not None and i >= query_lengths[b]:
                continue  # a padded query sees nothing
            end = i + 1 if causal else k_len  # keys j <= i
            if key_lengths is not None:
                end = min(end, key_lengths[b])  # keys j < length
            visible[b, 0, r, :end] = True
    return visible


def computed_tiles(block_mask):
    """How many tiles the kernel computes: the partial ones plus the full ones."""
    full = block_mask.full_kv_num_blocks
    return int(block_mask.kv_num_blocks.sum()) + (
        0 if full is None else int(full.sum())
    )


# ---------------------------------------------------------------------------
# the block tables
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seq, block", [(512, 128), (512, 64), (256, 128)])
def test_causal_block_mask_computes_only_the_lower_triangle_of_tiles(seq, block):
    n = seq // block
    block_mask = flex_block_mask(seq, seq, causal=True, block_size=block)
    # n diagonal tiles need the mask_mod, the n (n - 1) / 2 below it do not,
    # the n (n - 1) / 2 above it are skipped
    assert int(block_mask.kv_num_blocks.sum()) == n
    assert int(block_mask.full_kv_num_blocks.sum()) == n * (n - 1) // 2
    assert computed_tiles(block_mask) == n * (n + 1) // 2
    assert block_mask.sparsity() == pytest.approx(100 * (n - 1) / (2 * n))
    assert block_mask.kv_num_blocks.tolist() == [[[1] * n]]
    assert block_mask.full_kv_num_blocks.tolist() == [[list(range(n))]]


def test_decoding_block_mask_skips_no_past_tile():
    # 128 queries at positions 384 .. 511: tiles 0-2 of keys are wholly in
    # the past (full), tile 3 holds the diagonal (partial)
    block_mask = flex_block_mask(128, 512, causal=True)
    assert block_mask.full_kv_num_blocks.tolist() == [[[3]]]
    assert block_mask.kv_num_blocks.tolist() == [[[1]]]
    assert block_mask.kv_indices[0, 0, 0, 0] == 3


@pytest.mark.parametrize(
    "q_len, k_len, block",
    [(1, 300, 128), (100, 300, 128), (200, 200, 64), (129, 257, 64), (70, 70, 16)],
)
@pytest.mark.parametrize("causal", [True, False])
def test_closed_form_tables_equal_create_block_mask(q_len, k_len, block, causal):
    from torch.nn.attention.flex_attention import create_block_mask

    offset = k_len - q_len

    def rule(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset if causal else kv_idx >= 0

    ours = flex_block_mask(q_len, k_len, causal=causal, block_size=block)
    torchs = create_block_mask(rule, None, None, q_len, k_len, "cpu", block)
    for count, index in (
        ("kv_num_blocks", "kv_indices"),
        ("full_kv_num_blocks", "full_kv_indices"),
        ("q_num_blocks", "q_indices"),
        ("full_q_num_blocks", "full_q_indices"),
    ):
        n = getattr(torchs, count)
        assert torch.equal(getattr(ours, count), n), count
        used = torch.arange(getattr(torchs, index).shape[-1]) < n[..., None]
        assert torch.equal(getattr(ours, index)[used], getattr(torchs, index)[used])


def test_padding_block_mask_has_one_table_per_sequence_and_skips_padding():
    mask = padding_mask(torch.tensor([256, 100]), 256, queries=True)  # (B,1,T,T)
    block_mask = flex_block_mask(256, 256, causal=True, mask=mask)
    assert tuple(block_mask.kv_num_blocks.shape) == (B, 1, 2)
    # sequence 0: the causal 3 of 4 tiles; sequence 1 (length 100): one tile
    assert computed_tiles(block_mask[0]) == 3
    assert computed_tiles(block_mask[1]) == 1


def test_causal_flex_makes_no_dense_mask(monkeypatch):
    """causal=True alone: the tables come from tile indices, no (Tq, Tk) mask."""
    import torch.nn.attention.flex_attention as flex

    def refuse(*args, **kwargs):
        raise AssertionError("a dense mask was built")

    monkeypatch.setattr(flex, "create_block_mask", refuse)
    monkeypatch.setattr(attention, "causal_mask", refuse)
    monkeypatch.setattr(attention, "_combined_mask", refuse)
    q, k, v = qkv(3, 7)
    expected = softmax_attention(q, k, v, mask=visibility(3, 7, causal=True))
    got = attend(q, k, v, causal=True, kernel="flex")
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------
# block-mask Flex against the written-out attention
# ---------------------------------------------------------------------------

CASES = {
    "causal": dict(q_len=200, k_len=200, causal=True),
    "padding": dict(q_len=200, k_len=200, causal=False, key_lengths=(200, 90)),
    "causal-padding": dict(q_len=200, k_len=200, causal=True, key_lengths=(130, 200)),
    "decoding": dict(q_len=70, k_len=300, causal=True, key_lengths=(300, 250)),
    "one-query": dict(q_len=1, k_len=300, causal=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_block_mask_flex_equals_naive_and_the_written_out_attention(case):
    spec = CASES[case]
    q_len, k_len, causal = spec["q_len"], spec["k_len"], spec["causal"]
    q, k, v = qkv(q_len, k_len, seed=1)
    lengths = spec.get("key_lengths")
    mask = None if lengths is None else padding_mask(torch.tensor(lengths), k_len)
    visible = visibility(q_len, k_len, causal=causal, key_lengths=lengths)
    expected = softmax_attention(q, k, v, mask=visible)
    with torch.no_grad():
        naive = attend(q, k, v, mask=mask, causal=causal, kernel="naive")
        flex = attend(q, k, v, mask=mask, causal=causal, kernel="flex")
        # prebuilt, with smaller tiles, as a benchmark would reuse it
        block_mask = flex_block_mask(
            q_len, k_len, causal=causal, mask=mask, block_size=32
        )
        reused = attend(q, k, v, causal=causal, kernel="flex", block_mask=block_mask)
    for got in (naive, flex, reused):
        torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=0)


def test_fully_masked_rows_and_tile_rows_give_zeros_not_nan():
    # sequence 1 has 100 real tokens of 256: its query rows 100..255 see no key,
    # and rows 128..255 form a whole row of tiles with nothing to compute
    lengths = (256, 100)
    mask = padding_mask(torch.tensor(lengths), 256, queries=True)
    q, k, v = qkv(256, 256, seed=2)
    visible = visibility(256, 256, causal=True, key_lengths=lengths)
    visible &= visibility(256, 256, causal=False, query_lengths=lengths)
    with torch.no_grad():
        out = attend(q, k, v, mask=mask, causal=True, kernel="flex")
    assert not out.isnan().any()
    assert torch.equal(out[1, :, 100:], torch.zeros(H, 156, D))
    expected = softmax_attention(q, k, v, mask=visible)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------
# ALiBi and T5 score_mods on the block-mask path
# ---------------------------------------------------------------------------


def make_scheme(name):
    torch.manual_seed(0)
    if name == "alibi":
        return ALiBiScheme(ALiBiBias(H))
    table = T5RelativeBias(
        H, bidirectional=name == "t5-bidirectional", num_buckets=8, max_distance=20
    )
    torch.nn.init.normal_(table.weight)
    return T5BiasScheme(table)


@pytest.mark.parametrize("name", ["alibi", "t5-bidirectional", "t5-causal"])
@pytest.mark.parametrize("causal", [True, False])
def test_alibi_and_t5_score_mods_compose_with_the_block_mask(name, causal):
    """The score_mod adds the bias at the decoding offset, the block mask masks."""
    scheme = make_scheme(name)
    q_len, k_len = 24, 80
    q, k, v = qkv(q_len, k_len, seed=3)
    mask = padding_mask(torch.tensor([80, 61]), k_len)
    expected = scheme_attention(scheme, q, k, v, causal=causal, mask=mask)
    block_mask = flex_block_mask(q_len, k_len, causal=causal, mask=mask, block_size=16)
    with torch.no_grad():
        built = attend(q, k, v, scheme, mask=mask, causal=causal, kernel="flex")
        reused = attend(
            q, k, v, scheme, causal=causal, kernel="flex", block_mask=block_mask
        )
    for got in (built, reused):
        torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------
# compiled FlexAttention: one small compile
# ---------------------------------------------------------------------------


@pytest.mark.skipif(
    not flex_compile_available("cpu"),
    reason="TorchInductor cannot compile FlexAttention on this CPU "
    "(needs x86 with AVX2 and a C++ compiler)",
)
def test_compiled_flex_on_the_cpu_equals_eager_and_naive():
    # decoding, causal, padded and ALiBi: 2 x 3 tiles of 128, some full,
    # some partial, some skipped, so the tables decide what is computed
    scheme = make_scheme("alibi")
    q_len, k_len = 200, 300
    q, k, v = qkv(q_len, k_len, seed=4)
    mask = padding_mask(torch.tensor([300, 180]), k_len)
    block_mask = flex_block_mask(q_len, k_len, causal=True, mask=mask)
    with torch.no_grad():
        seconds = compile_flex(q, k, v, scheme, causal=True, block_mask=block_mask)
        compiled = attend(
            q, k, v, scheme, causal=True, kernel="flex", block_mask=block_mask,
            compile=True,
        )  # fmt: skip
        eager = attend(q, k, v, scheme, causal=True, kernel="flex", mask=mask)
        naive = attend(q, k, v, scheme, causal=True, kernel="naive", mask=mask)
    assert seconds > 0 and math.isfinite(seconds)
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(compiled, naive, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------
# bad use
# ---------------------------------------------------------------------------


def test_block_mask_and_compile_are_for_flex_only_and_must_fit():
    q, k, v = qkv(6, 6)
    block_mask = flex_block_mask(6, 6, causal=True)
    with pytest.raises(ValueError, match="block_mask is for kernel='flex'"):
        attend(q, k, v, causal=True, kernel="sdpa", block_mask=block_mask)
    with pytest.raises(ValueError, match="compile=True is for kernel='flex'"):
        attend(q, k, v, kernel="naive", compile=True)
    with pytest.raises(ValueError, match="either mask or block_mask"):
        attend(q, k, v, kernel="flex", block_mask=block_mask, mask=torch.ones(6, 6) > 0)
    with pytest.raises(ValueError, match="must be a FlexAttention BlockMask"):
        attend(q, k, v, kernel="flex", block_mask=torch.ones(6, 6) > 0)
    with pytest.raises(ValueError, match=r"built for \(q_len, k_len\) = \(6, 6\)"):
        attend(*qkv(2, 6), causal=True, kernel="flex", block_mask=block_mask)
    with pytest.raises(ValueError, match="built with causal=True"):
        attend(q, k, v, causal=False, kernel="flex", block_mask=block_mask)
    per_batch = flex_block_mask(6, 6, batch=3)
    with pytest.raises(ValueError, match="does not broadcast to q's"):
        attend(q, k, v, kernel="flex", block_mask=per_batch)


def test_flex_block_mask_rejects_bad_masks_and_sizes():
    with pytest.raises(ValueError, match="mask must be boolean"):
        flex_block_mask(4, 4, mask=torch.ones(4, 4))
    with pytest.raises(ValueError, match="does not broadcast to"):
        flex_block_mask(4, 4, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask has batch size 2 but batch=3"):
        flex_block_mask(4, 4, mask=torch.ones(2, 1, 4, 4, dtype=torch.bool), batch=3)
    with pytest.raises(ValueError, match="q_len=5 is larger than k_len=4"):
        flex_block_mask(5, 4, causal=True)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        flex_block_mask(4, 4, block_size=0)


def test_compile_says_why_it_cannot_run(monkeypatch):
    q, k, v = qkv(4, 4)
    monkeypatch.setattr(flex, "_compile_problem", lambda device: "no compiler")
    with pytest.raises(ValueError, match="cannot run on cpu: no compiler; use"):
        attend(q, k, v, kernel="flex", compile=True)
    monkeypatch.setattr(flex, "_compile_problem", lambda device: None)
    q.requires_grad_(True)
    with pytest.raises(ValueError, match="has no backward pass"):
        attend(q, k, v, kernel="flex", compile=True)
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        attend(*(t.double() for t in qkv(4, 4)), kernel="flex", compile=True)


def test_a_failed_compile_names_the_way_out(monkeypatch):
    from torch._dynamo.exc import BackendCompilerFailed

    def broken(*args, **kwargs):
        raise BackendCompilerFailed(broken, RuntimeError("no kernel"), None)

    monkeypatch.setattr(flex, "_compile_problem", lambda device: None)
    monkeypatch.setattr(flex, "_compiled_flex_attention", lambda: broken)
    with torch.no_grad(), pytest.raises(RuntimeError, match="use compile=False"):
        attend(*qkv(4, 4), kernel="flex", compile=True)


def tile_tables_by_hand(q_len, k_len, block):
    """The causal block tables from a dense mask built key by key: query row r at
    ``i = r + k_len - q_len`` sees key j when ``j <= i``. A tile is *full* when it
    lies wholly inside both sequences and every score in it is visible, *partial*
    when some score is visible and it is not full. Returns, per tile row, the
    partial and full columns in order, and the same per tile column (q side)."""
    offset = k_len - q_len
    visible = [[j <= r + offset for j in range(k_len)] for r in range(q_len)]
    rows, cols = -(-q_len // block), -(-k_len // block)
    kind = {}
    for m in range(rows):
        for n in range(cols):
            scores = [
                visible[r][j]
                for r in range(m * block, min((m + 1) * block, q_len))
                for j in range(n * block, min((n + 1) * block, k_len))
            ]
            inside = (m + 1) * block <= q_len and (n + 1) * block <= k_len
            if inside and all(scores):
                kind[m, n] = "full"
            elif any(scores):
                kind[m, n] = "partial"
    by_row = {
        which: [
            [n for n in range(cols) if kind.get((m, n)) == which] for m in range(rows)
        ]
        for which in ("partial", "full")
    }
    by_col = {
        which: [
            [m for m in range(rows) if kind.get((m, n)) == which] for n in range(cols)
        ]
        for which in ("partial", "full")
    }
    return visible, by_row, by_col


def listed(counts, indices):
    """A block table's (count, indices) as one list of used indices per row."""
    return [indices[row, : int(c)].tolist() for row, c in enumerate(counts)]


@pytest.mark.parametrize(
    "q_len, k_len, block",
    # k_len - q_len one short of a multiple of the block
    [
        (17, 32, 16),  # 15
        (32, 63, 16),  # 31
        (1, 16, 16),  # 15: decoding one token
        (1, 64, 16),  # 63
        (40, 87, 16),  # 47, both lengths ragged
        (48, 111, 16),  # 63, whole query tiles
        (24, 31, 8),  # 7
        (129, 256, 128),  # 127, the default block
        # and a tile row's last query one short of a key tile: 16 + 16 = 2 * 16
        (1, 17, 16),
        (17, 33, 16),
    ],
)
def test_causal_tables_when_the_offset_is_one_short_of_a_block(q_len, k_len, block):
    """Issue 32: with the queries the last ``q_len`` of ``k_len`` positions and the
    offset ``k_len - q_len`` one short of a multiple of the block, the diagonal
    falls on a tile's last column: a tile's last key is then visible from its
    first row exactly, the edge where a ``<`` for ``<=`` (or the other way)
    misfiles a full tile as partial or skipped. (The last two cases put a tile
    row's last query on a key tile's first key: the edge of a *visited* tile.)
    The tables (both sides) and the mask_mod equal those of a mask built score
    by score."""
    visible, by_row, by_col = tile_tables_by_hand(q_len, k_len, block)
    ours = flex_block_mask(q_len, k_len, causal=True, block_size=block)
    assert listed(ours.kv_num_blocks[0, 0], ours.kv_indices[0, 0]) == by_row["partial"]
    assert (
        listed(ours.full_kv_num_blocks[0, 0], ours.full_kv_indices[0, 0])
        == by_row["full"]
    )
    assert listed(ours.q_num_blocks[0, 0], ours.q_indices[0, 0]) == by_col["partial"]
    assert (
        listed(ours.full_q_num_blocks[0, 0], ours.full_q_indices[0, 0])
        == by_col["full"]
    )
    zero = torch.zeros((), dtype=torch.long)
    q_idx = torch.arange(q_len)[:, None]
    kv_idx = torch.arange(k_len)[None, :]
    assert ours.mask_mod(zero, zero, q_idx, kv_idx).tolist() == visible
