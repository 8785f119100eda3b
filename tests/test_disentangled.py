"""Tests for pe_tutorial.encodings.disentangled: DeBERTa's buckets and attention against Hugging Face's code.

``fixtures/hf_deberta.json`` holds what transformers' DeBERTa-v2 layer computes
(``fixtures/make_hf_deberta.py`` regenerates it): its log buckets for three
settings, and the whole attention output for a bucketed, a clipped and a
content-to-position-only layer. The loop references for every kernel and for
decoding are in ``test_schemes.py`` (``reference.deberta_score``).
"""

import json
import math
import pathlib

import pytest
import torch

from pe_tutorial.attention.core import attend
from pe_tutorial.attention.schemes import DisentangledScheme
from pe_tutorial.encodings.disentangled import (
    DisentangledRelativeBias,
    deberta_log_bucket,
    disentangled_rows,
)

from reference import AVAILABLE_KERNELS

FIXTURE = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "hf_deberta.json").read_text()
)


@pytest.mark.parametrize(
    "case", FIXTURE["buckets"], ids=lambda c: f"{c['position_buckets']}"
)
def test_log_buckets_equal_transformers(case):
    got = deberta_log_bucket(
        torch.tensor(case["distance"]), case["position_buckets"], case["max_position"]
    )
    assert got.tolist() == case["bucket"]


def test_log_buckets_are_exact_up_to_mid_then_logarithmic():
    d = torch.arange(-511, 512)
    b = deberta_log_bucket(d, 256, 512)
    assert torch.equal(b[d.abs() <= 128], d[d.abs() <= 128])
    # odd, monotone, and the farthest distance lands on the last value 2 mid - 1
    assert torch.equal(b, -b.flip(0))
    assert (b.diff() >= 0).all()
    assert b.max() == 255
    # a distance n beyond mid: mid + ceil((mid - 1) log(n / mid) / log(511 / mid))
    n = 300
    expected = 128 + math.ceil(127 * math.log(n / 128) / math.log(511 / 128))
    assert b[d == n].item() == expected


def _module(case):
    module = DisentangledRelativeBias(
        case["num_heads"],
        case["head_dim"],
        max_relative_positions=case["max_relative_positions"],
        position_buckets=case["position_buckets"],
        terms=tuple(case["terms"]),
    )
    with torch.no_grad():
        module.embeddings.copy_(torch.tensor(case["rel_embeddings"]))
        for proj, name in (
            (module.key_proj, "pos_key_proj"),
            (module.query_proj, "pos_query_proj"),
        ):
            if proj is not None:
                proj.weight.copy_(torch.tensor(case[f"{name}_weight"]))
                proj.bias.copy_(torch.tensor(case[f"{name}_bias"]))
    return module


@pytest.mark.parametrize("case", FIXTURE["attention"], ids=lambda c: c["name"])
def test_attention_equals_transformers_deberta_layer(case):
    """The scheme in every kernel gives the output of DeBERTa-v2's DisentangledSelfAttention."""
    scheme = DisentangledScheme(_module(case))
    q, k, v = (torch.tensor(case[name]) for name in ("q", "k", "v"))
    expected = torch.tensor(case["context"], dtype=torch.float64)
    for kernel in AVAILABLE_KERNELS:
        with torch.no_grad():
            got = attend(q.float(), k.float(), v.float(), scheme, kernel=kernel)
        torch.testing.assert_close(
            got.double(),
            expected,
            atol=1e-4,
            rtol=1e-4,
            msg=lambda m, kernel=kernel: f"kernel {kernel}: {m}",
        )


def test_position_to_content_reads_the_row_of_i_minus_j_as_the_released_code_does():
    """The paper writes d(j, i) in the p2c term; with it the output leaves transformers'."""
    case = FIXTURE["attention"][0]
    module = _module(case)
    q, k, v = (torch.tensor(case[name]).float() for name in ("q", "k", "v"))
    with torch.no_grad():
        bias = module(q, k)
        # recompute with the paper's d(j, i) = the transposed rows
        rows = module.rows(q.shape[-2])
        scale = math.sqrt(module.scale_factor * module.head_dim)
        c2p = (q @ module._per_head(module.key_proj).transpose(-1, -2)).gather(
            -1, rows.expand(*q.shape[:-1], q.shape[-2])
        )
        p2c_paper = (module._per_head(module.query_proj) @ k.transpose(-1, -2)).gather(
            -2, rows.T.expand(*q.shape[:-1], q.shape[-2])
        )
    paper = (c2p + p2c_paper) / scale
    assert not torch.allclose(paper, bias, atol=1e-3)
    expected = torch.tensor(case["context"], dtype=torch.float64)
    q_scaled = q / math.sqrt(module.scale_factor)
    weights = torch.softmax(
        q_scaled @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + paper, -1
    )
    assert not torch.allclose((weights @ v).double(), expected, atol=1e-3)


def test_rows_clip_to_the_span_without_buckets():
    rows = disentangled_rows(1, 10, span=3)
    # the query sits at 9: i - j = 9 .. 0, rows clip(i - j + 3, 0, 5)
    assert rows.tolist() == [[5, 5, 5, 5, 5, 5, 5, 5, 4, 3]]


def test_bias_depends_on_relative_position_only():
    """Shifting a window of tokens leaves its block of the bias unchanged."""
    torch.manual_seed(0)
    module = DisentangledRelativeBias(
        2, 4, max_relative_positions=8, position_buckets=4
    )
    for p in module.parameters():
        torch.nn.init.normal_(p)
    q, k = torch.randn(2, 1, 2, 12, 4)
    with torch.no_grad():
        whole = module(q, k)
        window = module(q[:, :, 3:9], k[:, :, 3:9])
    torch.testing.assert_close(whole[:, :, 3:9, 3:9], window)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(terms=("c2p", "p2p")), "terms"),
        (dict(terms=()), "terms"),
        (dict(terms=("c2p", "c2p")), "terms"),
        (dict(position_buckets=256, max_relative_positions=100), "max_position"),
        (dict(max_relative_positions=0), "max_relative_positions"),
    ],
)
def test_bad_settings_fail_when_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DisentangledRelativeBias(2, 4, **kwargs)


def test_queries_with_other_heads_are_rejected():
    module = DisentangledRelativeBias(2, 4, max_relative_positions=4)
    with pytest.raises(ValueError, match="heads=2"):
        module(torch.randn(1, 3, 5, 4), torch.randn(1, 3, 5, 4))


def test_a_model_trains_deberta_with_one_term_or_both():
    """Chapter 9 trains DeBERTa's c2p term alone beside both (deberta_terms): the
    model's layers get exactly those terms, and a wrong name is refused."""
    from pe_tutorial.lm.model import ByteTransformer, ModelConfig

    for terms in ("c2p+p2c", "c2p", "p2c"):
        model = ByteTransformer(ModelConfig(scheme="deberta", deberta_terms=terms))
        biases = [m for m in model.modules() if isinstance(m, DisentangledRelativeBias)]
        assert biases and {b.terms for b in biases} == {tuple(terms.split("+"))}
        has_c2p = all(b.key_proj is not None for b in biases)
        assert has_c2p == ("c2p" in terms)
    with pytest.raises(ValueError, match=r"unknown deberta_terms 'c2p\+c2p'"):
        ModelConfig(scheme="deberta", deberta_terms="c2p+c2p")
