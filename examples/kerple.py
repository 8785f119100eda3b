"""KERPLE's logarithmic bias (Chi et al., 2022), added to the book's experiments
as a reader would add their own encoding: one file, the public API only.

Each head h adds to the score of query i and key j

    b_h(i, j) = -r1_h * log(1 + r2_h * |i - j|),    r1_h, r2_h > 0,

KERPLE's "log" kernel (a conditionally positive definite kernel, so the
paper's argument for it as a bias holds). Both parameters are learned per
head; as in the authors' code, r1 starts uniform in (0, 2) and r2 uniform in
(0, 1), and each is held at 0.01 or more in the forward pass. Near keys are
penalised about as ALiBi's slopes do; far keys only logarithmically more.

Judge it as chapter 9 judges the book's schemes:

    python -m pe_tutorial.experiments judge examples/kerple.py --jobs 2
"""

import torch
from torch import nn

import pe_tutorial as pe

SMALLEST = 0.01  # each parameter's floor in the forward pass


class KerpleLog(pe.PositionScheme):
    """One layer's bias: ``-r1 * log(1 + r2 * |i - j|)``, one (r1, r2) per head."""

    def __init__(self, num_heads: int):
        super().__init__()
        self.r1 = nn.Parameter(2 * torch.rand(num_heads))
        self.r2 = nn.Parameter(torch.rand(num_heads))

    def bias(self, q: torch.Tensor, k: torch.Tensor, *, causal: bool) -> torch.Tensor:
        queries, keys = q.shape[-2], k.shape[-2]
        i = torch.arange(keys - queries, keys, device=q.device)  # the queries' places
        j = torch.arange(keys, device=q.device)
        distance = (i[:, None] - j[None, :]).abs().to(q.dtype)
        r1 = self.r1.clamp(min=SMALLEST).to(q.dtype)[:, None, None]
        r2 = self.r2.clamp(min=SMALLEST).to(q.dtype)[:, None, None]
        return -r1 * torch.log1p(r2 * distance)  # (heads, queries, keys)


pe.register_scheme(
    pe.ModelScheme(
        "kerple-log",
        "scores",
        9,
        "KERPLE's learned logarithmic bias, -r1 log(1 + r2 |i - j|) per head",
        layer=lambda config, shared: KerpleLog(config.num_heads),
    )
)
