"""Name the file of each scored segment in records made before runs recorded it.

    python tools/add_segment_files.py pe_tutorial/results/experiments-tuned.json ...

Since chapter 9's fourth edition a record holds, beside each corpus it read,
the file each scored segment starts in (``metadata.corpora[name].segment_files``),
so verdicts resample files rather than segments (``lm.run_verdicts``). The
segments are a pure function of the corpus and of the record's settings
(``segment_starts``: ``eval_segments`` segments of the longest length, seed 0),
so an older record can be given them *after the fact*, on one condition: the
corpus read now is the corpus the record read. The tool reads each corpus at
the record's sizes and refuses (exit status 1, the difference named) unless
its description (Python version, source, split and sizes) is the recorded one;
it then adds the files and the split they were read on, and notes under
``metadata.segment_files_added`` when, by what and with which Python. Nothing
measured changes. A record that already names its files is left as it is.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

from pe_tutorial.experiments.running.runner import corpus_reader
from pe_tutorial.lm.windows import segment_start_files

TOOL = "tools/add_segment_files.py"


class CorpusChanged(ValueError):
    """The corpus this Python reads is not the one the record read."""


def add_segment_files(record: dict) -> list[str]:
    """Add ``segment_files`` to each corpus of ``record`` that lacks them, in place;
    the names of the corpora given files. ``CorpusChanged`` if one differs."""
    meta, settings = record["metadata"], record["settings"]
    added = []
    for name, described in meta.get("corpora", {}).items():
        if described.get("segment_files"):
            continue
        corpus = corpus_reader(name)(
            max_train_bytes=described["train_bytes"],
            max_validation_bytes=described["validation_bytes"],
        )
        now = corpus.describe()
        recorded = {k: described[k] for k in now if k in described}
        if now != recorded or set(now) != set(recorded):
            raise CorpusChanged(
                f"corpus {name!r}: the record read {recorded}, this Python reads "
                f"{now}; run the tool with the record's Python ({meta.get('python')})"
            )
        described["scored_split"] = "validation"
        described["segment_files"] = segment_start_files(
            corpus,
            settings["eval_segments"],
            max(settings["lengths"]),
            side="validation",
        )
        added.append(name)
    if added:
        meta["segment_files_added"] = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "by": TOOL,
            "python": platform.python_version(),
            "corpora": added,
        }
    return added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python {TOOL}", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("records", nargs="+", type=Path)
    args = parser.parse_args(argv)
    status = 0
    for path in args.records:
        record = json.loads(path.read_text())
        try:
            added = add_segment_files(record)
        except CorpusChanged as error:
            print(f"{path}: {error}", file=sys.stderr)
            status = 1
            continue
        if added:
            path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{path}: {'added to ' + ', '.join(added) if added else 'already named'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
