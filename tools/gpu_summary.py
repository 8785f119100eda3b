"""The GPU command's summary: what each step left behind, read back into a few lines.

``tools/gpu_evidence.py`` calls these after every step (and every few seconds
during one): each suite's fate from the files written and the record steps'
logs (``suite_states``), a sanity line per GPU record holding its largest copy
against the device's nominal bandwidth (``sanity_lines``), the tests' counts
from pytest's JUnit report (``test_counts``), and the text of ``summary.txt``
(``summary_text``).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

# a GPU copy below this share of the device's nominal bandwidth is flagged
SANITY_SHARE = 0.5


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def summary_text(summary: dict) -> str:
    """The summary as a few lines to read: device, versions, steps, checks,
    suites, sanity, tests."""
    device = summary.get("device") or {}
    versions = (summary.get("environment") or {}).get("versions", {})
    kind = "DRY RUN on the CPU (tiny sizes)" if summary["dry_run"] else "GPU run"
    lines = [
        f"GPU evidence, {kind}, started {summary['started']} "
        f"({summary.get('seconds', 0):.0f} s of {summary['budget_s']:.0f})",
        f"device: {device.get('name', '?')} ({device.get('device', '?')}"
        + (f", capability {device['capability']}" if device.get("capability") else "")
        + ")",
        "versions: "
        + ", ".join(f"{k} {v}" for k, v in versions.items() if v is not None),
        f"result: {'every step passed' if summary['ok'] else 'NOT every step passed'}",
        "",
        "steps:",
    ]
    for step in summary["steps"]:
        detail = f" ({step['detail']})" if step.get("detail") else ""
        lines.append(
            f"  {step['name']:<18} {step['status']:<10} {step['seconds']:6.1f} s"
            f" of {step['budget_s']:.0f}{detail}"
        )
    checks = summary.get("checks") or []
    if checks:
        failed = [c for c in checks if c["status"] == "failed"]
        counts = {
            s: sum(c["status"] == s for c in checks) for s in ("passed", "skipped")
        }
        lines += [
            "",
            f"agreement checks: {counts['passed']} passed, {len(failed)} failed, "
            f"{counts['skipped']} skipped",
        ]
        lines += [f"  FAILED {c['name']}: {c['detail']}" for c in failed]
    suites = summary.get("suites") or {}
    if suites:
        lines += ["", "suites:"]
        lines += [f"  {name:<22} {state}" for name, state in sorted(suites.items())]
    if summary.get("sanity"):
        lines += ["", "sanity (copies against the device's nominal bandwidth):"]
        lines += [f"  {line}" for line in summary["sanity"]]
    tests = summary.get("tests")
    if tests:
        lines += [
            "",
            f"tests: {tests['passed']} passed, {tests['failed']} failed, "
            f"{tests['skipped']} skipped, of {tests['selected']} selected",
        ]
        lines += [f"  FAILED {name}" for name in tests["failures"]]
    if summary.get("skipped"):
        lines += ["", "skipped here:"]
        lines += [f"  - {what}" for what in summary["skipped"]]
    return "\n".join(lines) + "\n"


def suite_states(results: Path, logs: list[Path], expected) -> dict[str, str]:
    """Each suite's fate, from the files written and the record steps' output."""
    text = "\n".join(log.read_text(errors="replace") for log in logs if log.is_file())
    states = {}
    for name in expected if isinstance(expected, list) else []:
        states[name] = "NOT recorded (no step reached it: see logs/)"
    for name in re.findall(r"^FAILED: (\w+): ", text, flags=re.M):
        states[name] = "FAILED (see logs/)"
    for path in sorted(results.glob("bench-*--*.json")):
        name = path.name[len("bench-") :].split("--")[0]
        document = read_json(path) or {}
        busy = document.get("busy")
        if (document.get("settings") or {}).get("smoke"):
            states[name] = "recorded, smoke run (not a measurement)"
            continue
        found = re.search(r"--processes (\d+)", document.get("command", ""))
        processes = f" in {found.group(1)} processes" if found else ""
        states[name] = f"recorded{processes}" + (
            f", flagged busy: {busy}" if busy else ""
        )
    return states


def sanity_lines(results: Path) -> list[str]:
    """Each GPU record's largest copy against the device's nominal bandwidth,
    flagged below ``SANITY_SHARE`` of it (every ratio to a copy rests on it)."""
    lines = []
    for path in sorted(results.glob("bench-*--*.json")):
        document = read_json(path) or {}
        peak = (document.get("environment") or {}).get("peak_gb_s")
        copies = [
            row
            for row in document.get("results", [])
            if row.get("is_copy") and row.get("bandwidth_gb_s")
        ]
        if not peak or not copies:
            continue
        largest = max(copies, key=lambda row: row.get("bytes_moved") or 0)
        share = largest["bandwidth_gb_s"] / peak
        line = (
            f"{document.get('suite', path.name)}: {largest['name']} at "
            f"{largest['bandwidth_gb_s']:.0f} GB/s, {share:.0%} of the nominal "
            f"{peak:.0f} GB/s"
        )
        if share < SANITY_SHARE:
            line += (
                f" -- BELOW {SANITY_SHARE:.0%}: clocks held down, another job on the "
                "GPU, a copy too small to fill it, or a wrong nominal figure; read "
                "this suite's ratios to its copy with care"
            )
        lines.append(line)
    return lines


def test_counts(xml: Path) -> dict | None:
    try:
        root = ElementTree.parse(xml).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    cases = root.findall(".//testcase")
    failures = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in cases
        if case.find("failure") is not None or case.find("error") is not None
    ]
    skipped = sum(case.find("skipped") is not None for case in cases)
    return {
        "selected": len(cases),
        "failed": len(failures),
        "skipped": skipped,
        "passed": len(cases) - len(failures) - skipped,
        "failures": failures,
    }
