"""Baselines proven comparable: the judge's bridge (issue 69).

A baseline the judge reuses from the package's records pairs with the judged
scheme seed by seed: its seed s trained on the same batches as the scheme's
seed s, because a unit's batches and initial weights are drawn from its seed
and the corpus (which the reuse conditions hold equal: ``judge.baseline_sources``),
not from the machine or the code. What another machine (another CPU model,
another GPU) or another version of the package can still change is the
arithmetic: rounding, the order of sums, a kernel, a fix to a bug. Two runs
of one model then drift apart, and a systematic drift would be read as a
difference between the schemes.

The bridge measures it instead of assuming it away. When the record a stage
reuses was made on another machine or by another code version than the
judge's (``differences``), two of the reused baselines (``--bridge``, by
default RoPE and T5: one without position parameters, one with) are trained
again in that stage, here, from the same seeds (``bridge_plan``). The
judged record keeps those entries apart (``judged["bridge"]``), the verdicts
keep pairing with the recorded entries, and the card tests each bridge
baseline's drift, trained here minus recorded, with the same verdict function
(``viewing/bridge_card.py``).
"""

from __future__ import annotations

import torch

from ...devices import cpu_model, device_name
from ..configuration.config_fields import ExperimentError
from ..running.units import code_version

__all__ = ["BRIDGE", "here", "differences", "bridge_plan"]

# the baselines trained again by default: RoPE (no position parameters of its
# own) and T5 (a learned bias at its own rate)
BRIDGE = ("rope", "t5")
WANTED = 2  # how many the default bridge trains again


def here(device: torch.device) -> dict:
    """What this judge would record of its machine and code: the device type and
    name, the CPU's family-model-stepping (on a CPU), the package's code
    version."""
    return {
        "device": device.type,
        "device_name": device_name(device),
        "cpu_model": cpu_model() if device.type == "cpu" else None,
        "code_version": code_version(),
    }


def differences(recorded: dict, now: dict) -> list[str]:
    """How a record's ``metadata`` differs from ``now`` (``here``): its machine
    (device name, then CPU model where both name one) and its code version."""
    found = []
    name, then = now["device_name"], recorded.get("device_name")
    if then != name:
        found.append(f"recorded on {then or 'an unnamed machine'}, here {name}")
    elif now.get("cpu_model") and recorded.get("cpu_model") != now["cpu_model"]:
        found.append(
            f"recorded on {name}, CPU model {recorded.get('cpu_model') or 'not named'}, "
            f"here CPU model {now['cpu_model']}"
        )
    if recorded.get("code_version") != now["code_version"]:
        found.append(
            f"recorded by code version {recorded.get('code_version', 'not named')}, "
            f"here {now['code_version']}"
        )
    return found


def bridge_plan(
    reasons: dict[str, dict[str, str | None]],
    books: dict[str, dict | None],
    now: dict,
    wanted: tuple[str, ...] | None = None,
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Per reading stage, the reused baselines trained again as the bridge, and
    why (the record's ``differences`` from ``now``).

    ``reasons``: per stage, why each baseline is trained again (None: reused,
    ``judge._baselines``); ``books``: per stage, the record it reuses. A stage
    that reuses nothing, or whose record matches ``now``, has no bridge.
    ``wanted``: the baselines named by ``--bridge`` (each must be reused by
    every stage that bridges); None: ``BRIDGE``'s that are reused, topped up to
    two from the other reused baselines; empty: no bridge (``--no-bridge``)."""
    bridge, why = {}, {}
    if wanted == ():
        return bridge, why
    for stage, by_baseline in reasons.items():
        reused = [b for b, reason in by_baseline.items() if reason is None]
        record = books.get(stage)
        if not reused or record is None:
            continue
        found = differences(record["metadata"], now)
        if not found:
            continue
        if wanted is None:
            chosen = [b for b in BRIDGE if b in reused]
            chosen += [b for b in reused if b not in chosen][: WANTED - len(chosen)]
        else:
            missing = [b for b in wanted if b not in reused]
            if missing:
                raise ExperimentError(
                    f"--bridge: {', '.join(missing)} not reused by the {stage} stage "
                    f"(it reuses {', '.join(reused)}); name reused baselines, or "
                    "--no-bridge"
                )
            chosen = list(wanted)
        bridge[stage] = tuple(chosen)
        why[stage] = "; ".join(found)
    return bridge, why
