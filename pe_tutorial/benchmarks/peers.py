"""RoPE as other libraries apply it, for the ``rope`` suite (chapter 10).

Each peer is a function ``(q, k, positions, base) -> prepare`` that returns a
zero-argument callable doing what that library does inside a layer (its cos
and sin tables built once beforehand, as a model builds them once per
forward), or raises ``PeerUnavailable`` saying why it cannot run here (not
installed, needs a GPU). ``rotate_half`` is the formula Hugging Face's LLaMA
uses, written out here so that the comparison exists without transformers.

All peers use the "half" pairing except rotary-embedding-torch, whose default
is interleaved; the suite checks every peer's output against ``apply_rope``
with the matching pairing before it times anything.

Each peer gets q and k in the layout its library expects, and its row says
which (``call.layout_text``, shown under the row): transformers and Liger the
one Hugging Face's attention hands them, (B, H, T, D) views of tensors stored
(B, T, H, D) (its projections' output viewed per head, then transposed);
flash-attn (B, T, H, D) itself; the others (B, H, T, D). Liger rotates those
in place (``IN_PLACE``), as in a model, so its row is held against a copy
into given outputs, like the package's in-place row; handed a contiguous
(B, H, T, D) tensor it would first copy it into its layout.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable

import torch

from ..encodings.rope import rope_angles


class PeerUnavailable(Exception):
    """A peer that cannot run here; the message says why."""


def _import(module: str, package: str):
    try:
        with warnings.catch_warnings():
            # transformers imports tqdm.auto, which warns in a notebook without
            # ipywidgets; nothing here shows a progress bar
            warnings.filterwarnings("ignore", message="IProgress not found")
            return importlib.import_module(module)
    except ImportError as error:
        raise PeerUnavailable(
            f"{package} is not installed (pip install 'pe_tutorial[bench]')"
        ) from error


def _full_width_cos_sin(positions, head_dim, base, dtype):
    """cos and sin of width D (each angle twice), as rotate-half implementations keep them."""
    angles = rope_angles(positions, head_dim, base=base)  # (T, D/2)
    full = torch.cat((angles, angles), dim=-1)  # (T, D)
    return full.cos().to(dtype), full.sin().to(dtype)


def _hugging_face_layout(x: torch.Tensor) -> torch.Tensor:
    """``x`` (B, H, T, D) as Hugging Face's attention hands it to RoPE: the same
    values, a (B, H, T, D) view of a tensor stored (B, T, H, D)."""
    return x.transpose(1, 2).contiguous().transpose(1, 2)


HF_LAYOUT = "q, k as Hugging Face lays them out: (B, H, T, D) views of (B, T, H, D)"


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_half(q, k, positions, base) -> Callable[[], object]:
    """``q cos + rotate_half(q) sin`` with full-width cos and sin (the LLaMA formula)."""
    cos, sin = _full_width_cos_sin(positions, q.shape[-1], base, q.dtype)

    def call():
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin

    call.layout_text = "q, k (B, H, T, D)"
    return call


def transformers_llama(q, k, positions, base) -> Callable[[], object]:
    """transformers' ``apply_rotary_pos_emb`` from its LLaMA model."""
    llama = _import("transformers.models.llama.modeling_llama", "transformers")
    cos, sin = _full_width_cos_sin(positions, q.shape[-1], base, q.dtype)
    cos, sin = cos[None], sin[None]  # (1, T, D), as LlamaRotaryEmbedding returns
    q_hf, k_hf = _hugging_face_layout(q), _hugging_face_layout(k)

    def call():
        return llama.apply_rotary_pos_emb(q_hf, k_hf, cos, sin)

    call.layout_text = HF_LAYOUT
    # what the rope suite compiles for its compiled row of this peer
    call.function, call.arguments = llama.apply_rotary_pos_emb, (q_hf, k_hf, cos, sin)
    return call


def rotary_embedding_torch(q, k, positions, base) -> Callable[[], object]:
    """rotary-embedding-torch's ``apply_rotary_emb`` (interleaved pairs)."""
    module = _import("rotary_embedding_torch", "rotary-embedding-torch")
    angles = rope_angles(positions, q.shape[-1], base=base)  # (T, D/2)
    freqs = angles.repeat_interleave(2, dim=-1)  # (T, D): each angle twice, in place

    def call():
        return module.apply_rotary_emb(freqs, q), module.apply_rotary_emb(freqs, k)

    call.layout_text = "q, k (B, H, T, D)"
    return call


def _need_cuda(q, package):
    if q.device.type != "cuda":
        raise PeerUnavailable(f"{package} runs on CUDA GPUs only")


def flash_attn_rotary(q, k, positions, base) -> Callable[[], object]:
    """flash-attn's Triton rotary kernel (``flash_attn.layers.rotary.apply_rotary_emb``)."""
    _need_cuda(q, "flash-attn's rotary kernel")
    rotary = _import("flash_attn.layers.rotary", "flash-attn")
    angles = rope_angles(positions, q.shape[-1], base=base)  # (T, D/2)
    cos, sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)
    # flash-attn takes (B, T, H, D): the same bytes laid out as it expects
    q_bthd, k_bthd = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()

    def call():
        return (
            rotary.apply_rotary_emb(q_bthd, cos, sin),
            rotary.apply_rotary_emb(k_bthd, cos, sin),
        )

    call.layout = "bthd"
    call.layout_text = "q, k stored (B, T, H, D), as flash-attn takes them"
    return call


def liger_rope(q, k, positions, base) -> Callable[[], object]:
    """Liger Kernel's fused q/k RoPE (``liger_kernel.transformers.rope``)."""
    _need_cuda(q, "Liger's RoPE kernel")
    liger = _import("liger_kernel.transformers.rope", "liger-kernel")
    cos, sin = _full_width_cos_sin(positions, q.shape[-1], base, q.dtype)
    cos, sin = cos[None], sin[None]
    # in place, on copies: the first call (the check) turns them from q and k,
    # the timed calls keep turning them, as the package's in-place row does
    q_hf, k_hf = _hugging_face_layout(q), _hugging_face_layout(k)

    def call():
        return liger.liger_rotary_pos_emb(q_hf, k_hf, cos, sin)

    call.layout_text = HF_LAYOUT + ", rotated in place"
    return call


# the peers that rotate q and k in place (held against a copy into given outputs)
IN_PLACE = frozenset({"Liger liger_rotary_pos_emb"})

# name -> (builder, pairing its output follows)
PEERS: dict[str, tuple[Callable, str]] = {
    "rotate-half formula, written out": (rotate_half, "half"),
    "transformers apply_rotary_pos_emb": (transformers_llama, "half"),
    "rotary-embedding-torch": (rotary_embedding_torch, "interleaved"),
    "flash-attn apply_rotary_emb": (flash_attn_rotary, "half"),
    "Liger liger_rotary_pos_emb": (liger_rope, "half"),
}
