"""Grading a folder of submissions with an autograder zip (issue 11): each submission
in a child process of its own with a time limit, one row per submission appended to
a grade table as it finishes, a feedback file of the checks' diagnoses per student; a
run that stops continues where it stopped. ``tools/assignments.py grade`` is the
command."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from assignment_build import autograder_zip, test_files

GRADE_TIMEOUT = 300  # seconds for one submission, its kernel included


def grade_one(submission: Path, autograder: Path) -> dict:
    """Grade one submission with Otter, in this process: scores and feedback, as JSON-ready data.

    ``{"scores": {question: points}, "total", "possible", "feedback": {question:
    [message, ...]}}``; the feedback of a failed public test is its message (the
    check's diagnosis), a failed hidden test is only counted.
    """
    from otter.api import grade_submission

    results = grade_submission(str(submission), str(autograder), quiet=True)
    scores, feedback = {}, {}
    for name in sorted(results.results):
        scores[name] = results.get_score(name)
        failed = [r for r in results.results[name].test_case_results if not r.passed]
        messages = [
            (r.message or "failed").strip() for r in failed if not r.test_case.hidden
        ]
        hidden = sum(1 for r in failed if r.test_case.hidden)
        if hidden:
            messages.append(f"{hidden} hidden test(s) failed")
        if messages:
            feedback[name] = messages
    return {
        "scores": scores,
        "total": results.total,
        "possible": results.possible,
        "feedback": feedback,
    }


def diagnosis(message: str) -> str:
    """The line of an Otter failure message that says what went wrong (the check's diagnosis)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^\w*(Error|Exception)\b.*:", line)]
    if not errors:
        return lines[-1] if lines else "failed"
    return re.sub(r"^AssertionError:\s*", "", errors[-1])


def _problem_of(error: str) -> str:
    """A short reason for a grading that raised, from the last line of its error."""
    last = error.strip().splitlines()[-1] if error.strip() else "unknown error"
    if "NotJSONError" in error or "not valid JSON" in last or "BadZipFile" in error:
        return "not a notebook"
    return f"error: {last[:200]}"


def grade_isolated(submission: Path, autograder: Path, timeout: float) -> dict:
    """``grade_one`` in a child process of its own, stopped after ``timeout`` seconds.

    Returns ``grade_one``'s data with ``status`` "graded", or ``{"status": ...,
    "reason": ...}`` for a submission that is not a notebook, raised, or ran
    out of time (its whole process group, kernel included, is killed).
    """
    command = [
        sys.executable,
        str(Path(__file__).with_name("assignments.py").resolve()),
        "grade-one",
        str(submission),
        str(autograder),
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return {"status": "timed out", "reason": f"timed out after {timeout:g} s"}
    if process.returncode != 0:
        return {"status": "failed", "reason": _problem_of(err)}
    data = json.loads(out.strip().splitlines()[-1])
    return {"status": "graded", "reason": "", **data}


def _graded_already(table: Path) -> dict[str, dict]:
    if not table.is_file():
        return {}
    with table.open(newline="") as handle:
        return {row["submission"]: row for row in csv.DictReader(handle)}


def grade(
    result: Path, submissions: Path, table: Path, *, timeout: float = GRADE_TIMEOUT
) -> list[dict]:
    """Grade every submission in ``submissions`` with the autograder in ``result``.

    Each submission is graded in a process of its own with a time limit, so a
    corrupt notebook, an error or an endless loop costs only its own row:
    ``status`` is graded, failed or timed out, and ``reason`` says why. Rows are
    appended to ``table`` as they finish, and submissions already in it are
    skipped, so an interrupted run continues where it stopped (delete the table
    to grade again). Each graded submission with a failed question gets
    ``feedback/NAME.txt`` beside the table: the check's diagnosis per question.
    """
    files = sorted(
        p
        for p in submissions.iterdir()
        if p.suffix in (".ipynb", ".zip") and p.is_file()
    )
    if not files:
        raise SystemExit(f"no .ipynb or .zip submissions in {submissions}")
    autograder = autograder_zip(result)
    questions = sorted(test_files(result))
    columns = ["submission", "status", *questions, "total", "possible", "reason"]
    done = _graded_already(table)
    if done and list(next(iter(done.values()))) != columns:
        raise SystemExit(
            f"{table} has other columns than this assignment's; delete it or name "
            "another with --out"
        )
    table.parent.mkdir(parents=True, exist_ok=True)
    feedback_folder = table.parent / "feedback"
    new_table = not table.is_file()
    rows = list(done.values())
    with table.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        if new_table:
            writer.writeheader()
        for path in files:
            if path.name in done:
                print(f"{path.name}: already in {table.name}, skipped")
                continue
            graded = grade_isolated(path, autograder, timeout)
            row = {"submission": path.name, "status": graded["status"]}
            row["reason"] = graded["reason"]
            if graded["status"] == "graded":
                # the first diagnosis of each question lost, cut to a line
                row["reason"] = "; ".join(
                    f"{question}: {diagnosis(messages[0])[:160]}"
                    for question, messages in graded["feedback"].items()
                )
                row.update(graded["scores"])
                row["total"], row["possible"] = graded["total"], graded["possible"]
                print(f"{path.name}: {graded['total']:g} / {graded['possible']:g}")
                if graded["feedback"]:
                    feedback_folder.mkdir(exist_ok=True)
                    lines = [
                        f"{path.name}: {graded['total']:g} / {graded['possible']:g}"
                    ]
                    for question, messages in graded["feedback"].items():
                        lines.append(f"\n{question}:")
                        lines += [f"  - {m}" for m in messages]
                    (feedback_folder / f"{path.stem}.txt").write_text(
                        "\n".join(lines) + "\n"
                    )
            else:
                print(f"{path.name}: {graded['status']} ({graded['reason']})")
            writer.writerow(row)
            handle.flush()
            rows.append(row)
    counts = {
        status: sum(1 for row in rows if row["status"] == status)
        for status in ("graded", "failed", "timed out")
    }
    print(
        f"grade table: {table} ({counts['graded']} graded, {counts['failed']} failed, "
        f"{counts['timed out']} timed out)"
    )
    return rows
