"""KERPLE's logarithmic bias (Chi et al., 2022), added to the book's experiments
as a reader would add their own encoding: one file, the public API only.

Each head h adds to the score of query i and key j

    b_h(i, j) = -r1_h * log(1 + r2_h * |i - j|),    r1_h, r2_h > 0,

KERPLE's "log" kernel (a conditionally positive definite kernel, so the
paper's argument for it as a bias holds). As in the authors' code (built on
GPT-NeoX), one pair (r1, r2) per head is learned and shared by every layer,
r1 starts uniform in (0, 2) and r2 uniform in (0, 1), and before each use both
are projected back to 0.01 or more (the parameters themselves are clamped, so
a parameter at the floor still gets its gradient and can move up again). Near
keys get a nearly linear penalty, about r1 * r2 * |i - j|, as ALiBi with a
learned slope; far keys only logarithmically more.

Judge it as chapter 9 judges the book's schemes:

    python -m pe_tutorial.experiments judge examples/kerple.py --jobs 2
"""

import torch
from torch import nn

import pe_tutorial as pe

SMALLEST = 0.01  # each parameter's floor, restored before every use


class KerpleLogBias(nn.Module):
    """The model's one pair (r1, r2) per head, shared by every layer (as T5's table is)."""

    def __init__(self, num_heads: int):
        super().__init__()
        self.r1 = nn.Parameter(2 * torch.rand(num_heads))
        self.r2 = nn.Parameter(torch.rand(num_heads))

    def forward(self, queries: int, keys: int, device, dtype) -> torch.Tensor:
        """``-r1 * log(1 + r2 * |i - j|)`` for the last ``queries`` of ``keys``."""
        with torch.no_grad():  # the authors' projection onto r >= SMALLEST
            self.r1.clamp_(min=SMALLEST)
            self.r2.clamp_(min=SMALLEST)
        i = torch.arange(keys - queries, keys, device=device)  # the queries' places
        j = torch.arange(keys, device=device)
        distance = (i[:, None] - j[None, :]).abs().to(dtype)
        r1 = self.r1.to(dtype)[:, None, None]
        r2 = self.r2.to(dtype)[:, None, None]
        return -r1 * torch.log1p(r2 * distance)  # (heads, queries, keys)


class KerpleLog(pe.PositionScheme):
    """One layer's view of the shared bias."""

    def __init__(self, shared: KerpleLogBias):
        super().__init__()
        self.shared = shared

    def bias(self, q: torch.Tensor, k: torch.Tensor, *, causal: bool) -> torch.Tensor:
        return self.shared(q.shape[-2], k.shape[-2], q.device, q.dtype)


pe.register_scheme(
    pe.ModelScheme(
        "kerple-log",
        "scores",
        9,
        "KERPLE's learned logarithmic bias, -r1 log(1 + r2 |i - j|) per head, "
        "shared by the layers",
        shared=lambda config: KerpleLogBias(config.num_heads),
        layer=lambda config, shared: KerpleLog(shared),
    )
)
