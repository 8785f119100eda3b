"""A decoder's cache of rotated keys, and LongRoPE's switch from the short list to the long (chapter 11).

A decoder that caches keys after rotating them (transformers' ``DynamicCache``
holds them so) turns each key once, at the step that computes it. With plain
RoPE that is all: a key's angle depends on its own position only. Phi-3's
LongRoPE is different: a call whose largest position ``m`` has ``m + 1 >
original_max_positions`` (``L``) reads the *long* list of factors, a shorter
call the *short* one. So the step that first passes ``L`` turns its query by
the long list, while every key cached before it was turned by the short one,
and a score is no longer a function of the distance alone.

transformers' ``Phi3ForCausalLM.prepare_inputs_for_generation`` guards this:
the first time the sequence passes ``L`` with a cache of at most ``L`` tokens,
it drops the cache and re-encodes the whole prefix, now one call longer than
``L``, so every key is turned by the long list; from then on the cache holds
long-list keys only, and a prompt longer than ``L`` never meets the switch.

``RotatedKeyCache`` is that cache for one attention layer, with the choice
made explicit (``at_switch``):

- ``"recompute"`` (transformers' rule): re-encode the prefix at the switch.
  Here, for one layer, that turns the prefix's cached raw keys by the long
  list; in a model of several layers the prefix's hidden states change too,
  so a model runs the prefix again. ``recomputed`` counts the prefix tokens
  re-encoded, the price: once, about a prefill of ``L`` tokens;
- ``"refuse"``: raise at the switch, saying what to do instead;
- ``"keep"``: turn only the new keys by the long list and keep the old ones,
  as an attention layer without the guard does (the mixed scores).

``step(q, k, v)`` takes the new tokens' queries, keys and values
``(B, H, T, D)`` (one token when decoding, many for a prompt), places them at
the next positions, and returns their causal attention over the cache.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

from ..encodings.rope import RotaryEmbedding
from ..encodings.rope_scaling import LongRopeScaling
from .core import attend

__all__ = ["RotatedKeyCache", "AT_SWITCH"]

AtSwitch = Literal["recompute", "refuse", "keep"]
AT_SWITCH: tuple[str, ...] = get_args(AtSwitch)


class RotatedKeyCache:
    """One attention layer's cache of keys rotated when cached, LongRoPE's switch handled (ch. 11).

    ``rotary`` turns the queries and keys: plain RoPE, a fixed scaling, or a
    ``LongRopeScaling`` (whose list depends on the call's length). A scaling
    whose frequencies change at every length past ``L`` (dynamic NTK) is
    refused: every cached key would go stale at every step. ``at_switch`` is
    ``"recompute"`` (transformers' Phi-3), ``"refuse"`` or ``"keep"``.
    """

    def __init__(self, rotary: RotaryEmbedding, *, at_switch: AtSwitch = "recompute"):
        if not isinstance(rotary, RotaryEmbedding):
            raise ValueError(
                f"rotary must be a RotaryEmbedding, got {type(rotary).__name__}"
            )
        scaling = rotary.scaling
        if (
            scaling is not None
            and scaling.depends_on_length
            and not isinstance(scaling, LongRopeScaling)
        ):
            raise ValueError(
                f"{scaling} changes its frequencies at every length past "
                f"{scaling.original_max_positions}, so every key a cache holds would "
                "be stale at every step; re-encode the sequence at each step, or use "
                "a fixed scaling (RopeScaling('ntk', factor=...)) or LongRoPE"
            )
        if at_switch not in AT_SWITCH:
            raise ValueError(
                f"at_switch must be one of {AT_SWITCH}, got {at_switch!r}: "
                "'recompute' re-encodes the prefix at LongRoPE's switch as "
                "transformers' Phi-3 does, 'refuse' raises there, 'keep' mixes lists"
            )
        self.rotary = rotary
        self.at_switch = at_switch
        self.raw_keys: torch.Tensor | None = None  # (B, H, n, D), before rotation
        self.keys: torch.Tensor | None = None  # (B, H, n, D), as rotated when cached
        self.values: torch.Tensor | None = None
        self.long_list = False  # whether the cached keys were turned by the long list
        self.recomputed = 0  # prefix tokens re-encoded at the switch

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def _reads_long(self, length: int) -> bool:
        scaling = self.rotary.scaling
        return isinstance(scaling, LongRopeScaling) and scaling.uses_long_factors(
            length
        )

    def _positions(self, start: int, stop: int, like: torch.Tensor) -> torch.Tensor:
        return torch.arange(start, stop, device=like.device)

    def step(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The new tokens' attention over the cache and themselves, ``(B, H, T, D)``."""
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.dim() != 4:
                raise ValueError(
                    f"{name} must be (batch, heads, new tokens, head_dim), got shape "
                    f"{tuple(t.shape)}"
                )
        if not q.shape[-2] == k.shape[-2] == v.shape[-2] >= 1:
            raise ValueError(
                "q, k and v must hold the same new tokens (at least one), got "
                f"{q.shape[-2]}, {k.shape[-2]} and {v.shape[-2]}"
            )
        if self.keys is not None and k.shape[:2] != self.keys.shape[:2]:
            raise ValueError(
                f"the cache holds batch and heads {tuple(self.keys.shape[:2])}, the "
                f"new keys {tuple(k.shape[:2])}"
            )
        start, stop = len(self), len(self) + k.shape[-2]
        long_now = self._reads_long(stop)
        switching = long_now and start > 0 and not self.long_list
        if switching and self.at_switch == "refuse":
            self._refuse(start, stop)
        raw = k if self.raw_keys is None else torch.cat((self.raw_keys, k), dim=-2)
        values = v if self.values is None else torch.cat((self.values, v), dim=-2)
        if switching and self.at_switch == "recompute":
            # one call reaching position stop - 1 turns every key by the long list
            keys = self.rotary(raw, self._positions(0, stop, k))
            self.recomputed += start
        else:
            new = self.rotary(k, self._positions(start, stop, k))
            keys = new if self.keys is None else torch.cat((self.keys, new), dim=-2)
        self.raw_keys, self.keys, self.values = raw, keys, values
        # "keep" leaves short-list keys in the cache: it is long-list only if it
        # never switched, or if it filled from a first call past L
        if long_now and not (switching and self.at_switch == "keep"):
            self.long_list = True
        queries = self.rotary(q, self._positions(start, stop, q))
        return attend(queries, self.keys, self.values, causal=True)

    def _refuse(self, start: int, stop: int) -> None:
        original = self.rotary.scaling.original_max_positions
        raise ValueError(
            f"this step reaches position {stop - 1}, past LongRoPE's "
            f"original_max_positions {original}, so it turns by the long list, "
            f"but the {start} cached keys were turned by the short one; re-encode "
            "the prefix (at_switch='recompute', as transformers' Phi-3 does) or "
            "start with a prompt longer than original_max_positions"
        )
