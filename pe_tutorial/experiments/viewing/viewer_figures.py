"""The chapter's figures of a record, as PNG files: ``show FILE --figures DIR``
(``pages.run_plots``): bits per byte by length and position, learning curves, the
rate sweeps, the extensions' stages and the passkey grids."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..records.results import summarise
from .run_files import entry_corpus, own_corpus, plain_entries, readable

__all__ = ["write_figures"]


def write_figures(results: dict, folder: str | Path) -> list[Path]:
    """Chapter 9's figures of these results as PNG files in ``folder``; their paths.

    Each figure is drawn only where the results hold its section (a partial
    run's may hold few).
    """
    import matplotlib.pyplot as plt

    from ...pages import run_plots as plots
    from ...pages.plots import FIGURE_WIDTH

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    settings = results["settings"]
    L = settings["train"]["seq_len"]
    seeds = len(settings.get("seeds", [])) or "?"
    written: list[Path] = []

    def save(name: str, draw: Callable[[], object]) -> None:
        figure = draw()
        figure = getattr(figure, "figure", figure)
        path = folder / f"{name}.png"
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        written.append(path)

    def axes(height=4.5):  # the book's width (pages.plots.FIGURE_WIDTH)
        return plt.subplots(figsize=(FIGURE_WIDTH, height), constrained_layout=True)[1]

    def labels(section: str, entries: list[dict]) -> list[str]:
        return [row["variant"] for row in summarise(results, section, entries)]

    own = own_corpus(results)
    for corpus in dict.fromkeys(entry_corpus(e) for e in results["language_model"]):
        plain = list(plain_entries(results, corpus).values())
        if not plain:
            continue
        suffix = "" if corpus == own else f"-{Path(str(corpus)).name}"
        save(
            f"lengths{suffix}",
            lambda plain=plain, corpus=corpus: plots.length_curves(
                plain,
                labels=labels("language_model", plain),
                train_length=L,
                # the bars are each scheme's own spread; a verdict pairs the seeds
                # (a card draws those paired intervals apart: verdicts-N.png)
                title=f"Bits per byte by evaluation length ({corpus or 'own corpus'})\n"
                f"mean of {seeds} seeds; bars: ± one std, not the paired verdicts",
                ax=axes(),
            ),
        )
    plain = [
        e
        for e in plain_entries(results, own).values()
        if any(r.get("position_bpb") for r in e["runs"])
    ]
    if plain:
        bins = len(
            next(r["position_bpb"] for r in plain[0]["runs"] if r["position_bpb"])
        )
        save(
            "positions",
            lambda: plots.position_curves(
                plain,
                labels=labels("language_model", plain),
                train_length=L,
                position_bin=settings.get("position_bin", 1),
                merge=4 if bins % 4 == 0 else 1,
                title=f"Loss by position in a window of {max(settings['lengths'] or [L])}",
                ax=axes(4.8),
            ),
        )
    curved = [e for e in plain_entries(results, own).values() if e.get("curve")] or [
        e for e in results["language_model"] if e.get("curve")
    ]
    if curved:
        save(
            "learning_curves",
            lambda: plots.learning_curves(
                curved,
                labels=labels("language_model", curved),
                title=f"Bits per byte at L = {L} during training (validation split;\n"
                "the verdicts read the test split)",
                ax=axes(),
            ),
        )
    sweeps = _sweeps(results)
    if sweeps:
        save(
            "rate_sweep",
            lambda: plots.rate_sweep(
                sweeps, length=L, title="Each norm's best rate", ax=axes(4)
            )[0],
        )
    rope = plain_entries(results, own).get("rope")
    if results.get("rope_bands") and rope is not None:
        bands = [rope, *results["rope_bands"]]
        save(
            "rope_bands",
            lambda: plots.length_curves(
                bands,
                labels=["plain RoPE", *(e["mode"] for e in results["rope_bands"])],
                train_length=L,
                title="RoPE band ablation at evaluation",
                ax=axes(),
            ),
        )
    for section, base, what in (
        ("rope_extension", L, {}),
        (
            "passkey_extension",
            (settings.get("passkey") or {}).get("seq_len"),
            {"ylabel": "accuracy", "xlabel": "sequence length (symbols)"},
        ),
    ):
        if results.get(section) and base:
            save(section, lambda s=section, b=base, w=what: _stages(results, s, b, w))
    task = settings.get("lookback") or {}
    if results.get("lookback") and task.get("seq_len"):
        look = results["lookback"]

        def lookback():
            ax = plots.length_curves(
                look,
                labels=[e["scheme"] for e in look],
                train_length=task["seq_len"],
                title=f"Look-back task (k = {task.get('lookback', '?')}): accuracy",
                ylabel="accuracy",
                xlabel="sequence length (symbols)",
                ax=axes(),
                limits=(0.0, 1.0),
            )
            if task.get("num_symbols"):
                ax.axhline(1 / task["num_symbols"], color="0.6", linestyle=":")
            return ax

        save("lookback", lookback)
    if results.get("passkey"):
        grids = {e["scheme"]: e for e in results["passkey"]}
        save(
            "passkey",
            lambda: plots.passkey_grids(grids, title="Passkey retrieval"),
        )
    return written


def _sweeps(results: dict) -> dict[str, dict[float, dict]]:
    """Per scheme and norm, ``{rate: entry}`` where more than one rate was trained."""
    sweeps: dict[str, dict[float, dict]] = {}
    for e in results["language_model"]:
        if (
            entry_corpus(e) == own_corpus(results)
            and e["absolute"] == "input"
            and not e.get("changes")
            and not e.get("training")
            and e.get("learning_rate") is not None
            and readable(e, results["settings"]["train"]["seq_len"])
        ):
            label = f"{e['scheme']} {e['norm']}-norm"
            sweeps.setdefault(label, {})[e["learning_rate"]] = e
    return {label: sweep for label, sweep in sweeps.items() if len(sweep) > 1}


def _stages(results: dict, section: str, base: int, what: dict):
    """RoPE's scalings in two panels, zero-shot and fine-tuned (chapter 9)."""
    import matplotlib.pyplot as plt

    from ...pages import run_plots as plots
    from ...pages.plots import FIGURE_WIDTH

    stages = list(dict.fromkeys(e["stage"] for e in results[section]))
    fig, axes = plt.subplots(
        len(stages),
        1,
        figsize=(FIGURE_WIDTH, 4 * len(stages)),
        constrained_layout=True,
        sharex=True,
        squeeze=False,
    )
    factor = results["settings"].get("extension_factor")
    accuracy = "ylabel" in what
    for ax, stage in zip(axes[:, 0], stages):
        chosen = [e for e in results[section] if e["stage"] == stage]
        plots.length_curves(
            chosen,
            labels=[e["method"] for e in chosen],
            train_length=base,
            title=f"{'Passkey' if accuracy else 'RoPE'} with each scaling, {stage}",
            ax=ax,
            limits=(0.0, 1.0) if accuracy else None,
            **what,
        )
        if factor:
            ax.axvline(factor * base, color="0.6", linestyle=":", linewidth=1)
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")
    return fig
