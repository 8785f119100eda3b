"""A preset's plan of units, computed (in one process or several) and assembled.

Above ``configuration`` and ``records``; ``viewing`` and ``judging`` use it.

- ``units``       the kinds of unit, the preset fields each reads, and the
                  fingerprint derived from them with the code version
- ``measures``    small summaries of a unit's numbers (passkey depths, log text)
- ``run_context`` the few things of the runner that the extension and task units read
- ``extensions``  context extension on trained models (RoPE scalings and bands,
                  a learned table lengthened)
- ``tasks``       the look-back and passkey units
- ``run_data``    the corpora a run reads, and the segments it scores them on
- ``runner``      the plan of units; the language models trained and scored
- ``pool``        units computed in several processes at once (``--jobs``)
- ``run``         ``run_experiments``: the plan (or a shard) computed or read
                  back, assembled into a record
- ``merge``       the run files of a sharded run joined into one record
"""
