"""Each scheme's training chosen by the tuning sweeps (chapter 9, issue 34).

Before chapter 9 ranks the schemes, each is trained as well as the same
search allows: the ``tuning`` preset trains every scheme at four learning
rates, and ``tuning-position`` trains the schemes with position parameters
(learned tables, T5's, Shaw's, CoPE's and DeBERTa's) with those parameters at
10 and 30 times the rate (``TrainConfig.position_lr_multiplier``), at each of
three rates. One seed each: a sweep finds the neighbourhood of the best
setting, and the three-seed run at that setting is what the chapter ranks.

``sweep_points`` reads every trained setting from the records;
``best_training`` picks, per scheme, the setting with the lowest bits per
byte at the training length L; ``tuned_table`` writes it as a preset's
``[tuned]`` table. The rule is the plain one: the lowest score of one seed,
so two settings within the seeds' usual spread (about 0.01 bpb here) are a
coin toss between near equals, which is why the chapter also shows the whole
sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SweepPoint", "sweep_points", "best_training", "tuned_table"]


@dataclass(frozen=True)
class SweepPoint:
    """One trained setting of a sweep: a scheme, its rates and its score at L."""

    scheme: str
    learning_rate: float
    position_lr_multiplier: float
    bpb: float
    seeds: int


def sweep_points(*records: dict) -> list[SweepPoint]:
    """Every plain language model of the tuning records, as ``SweepPoint``s.

    A model counts when it is pre-norm with its table (if any) at the input,
    on the run's own corpus, with no ``ModelConfig`` change and no training
    field other than the position parameters' rate. Its score is the seeds'
    mean at the run's training length L. Records of different training
    (another L, model or step count) cannot be pooled: a ``ValueError`` says so.
    The models are compared on the fields both records hold: a field only the
    later record names was added to ``ModelConfig`` after the earlier was made,
    and switches something the earlier code did not have.
    """
    if not records:
        raise ValueError("give the tuning records (load_results('tuning'), ...)")
    points = []
    reference = None
    common = set.intersection(*(set(r["settings"]["model"]) for r in records))
    for record in records:
        settings = record["settings"]
        shape = (
            settings["train"]["seq_len"],
            settings["train"]["steps"],
            settings["train"]["batch_size"],
            tuple(sorted((k, settings["model"][k]) for k in common)),
        )
        if reference is not None and shape != reference:
            raise ValueError(
                f"the record of preset {record.get('preset')!r} trains another model "
                "or for another budget than the first; a sweep compares settings of "
                "one model and one budget"
            )
        reference = shape
        L = str(settings["train"]["seq_len"])
        own_corpus = settings.get("corpus", "stdlib")
        for entry in record["language_model"]:
            training = dict(entry.get("training", {}))
            multiplier = training.pop("position_lr_multiplier", 1.0)
            plain = (
                entry["norm"] == "pre"
                and entry["absolute"] == "input"
                and entry.get("corpus", own_corpus) == own_corpus
                and not entry.get("changes")
                and not training
            )
            stats = entry["summary"].get(L)
            if not plain or stats is None:
                continue
            points.append(
                SweepPoint(
                    entry["scheme"],
                    entry["learning_rate"],
                    float(multiplier),
                    stats["mean"],
                    stats["n"],
                )
            )
    settings_seen = [
        (p.scheme, p.learning_rate, p.position_lr_multiplier) for p in points
    ]
    twice = sorted({s for s in settings_seen if settings_seen.count(s) > 1})
    if twice:
        raise ValueError(f"settings trained in two records: {twice}; give each once")
    return points


def best_training(points: list[SweepPoint]) -> dict[str, SweepPoint]:
    """Per scheme, the setting with the lowest bits per byte at L."""
    best: dict[str, SweepPoint] = {}
    for point in points:
        if point.scheme not in best or point.bpb < best[point.scheme].bpb:
            best[point.scheme] = point
    return best


def tuned_table(best: dict[str, SweepPoint]) -> dict[str, dict[str, float]]:
    """The ``[tuned]`` table of a preset that trains each scheme at its best
    setting: its learning rate, and the position parameters' rate where it is
    not 1."""
    table = {}
    for scheme, point in best.items():
        fields = {"learning_rate": point.learning_rate}
        if point.position_lr_multiplier != 1.0:
            fields["position_lr_multiplier"] = point.position_lr_multiplier
        table[scheme] = fields
    return table
