"""A judged scheme's learned position parameters on its report card (issue 69).

Each language-model run of a record made since issue 69 keeps the scheme's
position parameters (``ByteTransformer.named_position_parameters``) as the
seeded model built them and as training left them
(``running.measures.position_parameter_values``): the values of a parameter
of at most ``VALUES_KEPT`` numbers, the root mean square of a larger one.
The card reads them per layer (a parameter's name says its layer; one shared
by the layers comes once, under the first) and per head (the parameter's
last axis whose size is the model's number of heads):

- a per-head scalar (KERPLE's r1 and r2, shape ``(H,)``) is a table row, each
  head's mean over seeds at the start and trained, with the trained values'
  range over seeds;
- any other parameter kept whole (T5's bucket table, ``(32, H)``) is a panel of
  ``position-parameters.png``: each head's trained values, mean over seeds,
  by index along the other axes, with the seeds' range shaded;
- a larger one (a learned absolute table) is its root mean square at the
  start and trained, mean over seeds.
"""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["kept_parameters", "head_axis", "parameter_lines", "parameter_figure"]

FIGURE_NAME = "position-parameters.png"


def kept_parameters(entry: dict) -> dict[str, dict[str, list[dict]]]:
    """``{name: {"start": [per seed], "trained": [per seed]}}`` of the runs of an
    entry that keep their position parameters, each item as the run keeps it
    (``shape`` and ``values`` or ``rms``); empty when none does."""
    found: dict[str, dict[str, list[dict]]] = {}
    for run in entry.get("runs", []):
        kept = run.get("position_parameters")
        if not kept:
            continue
        for when in ("start", "trained"):
            for name, item in kept[when].items():
                found.setdefault(name, {"start": [], "trained": []})[when].append(item)
    return found


def head_axis(shape: list[int], num_heads: int) -> int | None:
    """The last axis of ``shape`` whose size is ``num_heads``, or None."""
    for axis in range(len(shape) - 1, -1, -1):
        if shape[axis] == num_heads:
            return axis
    return None


def _stacked(items: list[dict]) -> torch.Tensor:
    """The seeds' values, ``(seeds, *shape)``."""
    return torch.tensor([item["values"] for item in items], dtype=torch.float64)


def _short(name: str) -> str:
    """A parameter's name without the model's path to the scheme's module."""
    return name.replace(".attention.scheme.", ": ").replace("blocks.", "layer ")


def parameter_lines(results: dict, entry: dict) -> tuple[list[str], list[str]]:
    """The card's section on ``entry``'s position parameters (empty when its runs
    keep none) and the names drawn in the figure (``parameter_figure``)."""
    kept = kept_parameters(entry)
    if not kept:
        return [], []
    heads = results["settings"]["model"]["num_heads"]
    seeds = len(next(iter(kept.values()))["trained"])
    scalars, drawn, large = [], [], []
    for name, sides in kept.items():
        shape = sides["trained"][0]["shape"]
        if "values" not in sides["trained"][0]:
            large.append(name)
        elif shape == [heads]:
            scalars.append(name)
        else:
            drawn.append(name)
    lines = [
        "",
        "## The scheme's position parameters",
        "",
        f"What training made of `{entry['scheme']}`'s own position parameters, on "
        f"text, over its {seeds} held-out {'seed' if seeds == 1 else 'seeds'} (each "
        "run keeps them as its seeded "
        "model built them and as training left them). A parameter shared by the "
        "layers is listed once, under the first layer that uses it.",
    ]
    if scalars:
        lines += [
            "",
            "Per head: the mean over seeds at the start -> trained, and the trained "
            "values' range over seeds.",
            "",
            "| parameter | " + " | ".join(f"head {h}" for h in range(heads)) + " |",
            "|---|" + "---:|" * heads,
        ]
        for name in scalars:
            start, trained = (_stacked(kept[name][w]) for w in ("start", "trained"))
            cells = [
                f"{start[:, h].mean():.3f} -> {trained[:, h].mean():.3f} "
                f"[{trained[:, h].min():.3f}, {trained[:, h].max():.3f}]"
                for h in range(heads)
            ]
            lines.append(f"| `{_short(name)}` | " + " | ".join(cells) + " |")
    if drawn:
        listed = ", ".join(
            f"`{_short(n)}` {tuple(kept[n]['trained'][0]['shape'])}" for n in drawn
        )
        lines += [
            "",
            f"Drawn in `{FIGURE_NAME}` (each head's trained values, mean over seeds, "
            f"with the seeds' range): {listed}.",
        ]
    if large:
        lines += [
            "",
            "Too large to keep whole, by root mean square (mean over seeds):",
            "",
        ]
        for name in large:
            rms = {
                w: sum(i["rms"] for i in kept[name][w]) / len(kept[name][w])
                for w in ("start", "trained")
            }
            shape = tuple(kept[name]["trained"][0]["shape"])
            lines.append(
                f"- `{_short(name)}` {shape}: {rms['start']:.4f} at the start -> "
                f"{rms['trained']:.4f} trained"
            )
    return lines, drawn


def parameter_figure(
    results: dict, entry: dict, names: list[str], folder: str | Path
) -> Path | None:
    """``position-parameters.png`` in ``folder``: a panel per parameter of
    ``names``, each head's trained values (mean over seeds, range shaded) by
    index along the other axes; None when ``names`` is empty."""
    if not names:
        return None
    import matplotlib.pyplot as plt

    from ...pages.plots import FIGURE_WIDTH, legend_below

    heads = results["settings"]["model"]["num_heads"]
    kept = kept_parameters(entry)
    figure, axes = plt.subplots(
        len(names),
        1,
        figsize=(FIGURE_WIDTH, 3.2 * len(names) + 0.8),
        constrained_layout=True,
        squeeze=False,
    )
    for ax, name in zip(axes[:, 0], names, strict=True):
        values = _stacked(kept[name]["trained"])  # (seeds, *shape)
        axis = head_axis(list(values.shape[1:]), heads)
        if axis is None:
            rows = values.reshape(len(values), 1, -1)  # one line
        else:
            rows = values.movedim(axis + 1, 1).reshape(len(values), heads, -1)
        index = range(rows.shape[-1])
        for h in range(rows.shape[1]):
            mean = rows[:, h].mean(0)
            line = ax.plot(index, mean, label=f"head {h}" if axis is not None else None)
            ax.fill_between(
                index,
                rows[:, h].amin(0),
                rows[:, h].amax(0),
                color=line[0].get_color(),
                alpha=0.2,
            )
        ax.set_title(f"{_short(name)} {tuple(values.shape[1:])}, trained")
        ax.set_xlabel("index along the axes other than the head's")
        ax.set_ylabel("value")
    if axes[-1, 0].get_legend_handles_labels()[0]:  # the last panel has heads
        legend_below(axes[-1, 0], columns=min(heads, 4))
    path = Path(folder) / FIGURE_NAME
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path
