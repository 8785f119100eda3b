"""Runs on disk: the run file a run writes unit by unit, and the recorded results.

Above ``configuration`` (a record names its preset), below ``running``.

- ``record``  ``RunFile``: finished units on disk, and what ``--resume`` reuses
- ``results`` where recorded results live; ``summarise``, ``format_rows``, ``entry``
"""
