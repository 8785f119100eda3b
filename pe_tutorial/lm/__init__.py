"""The small byte-level language model and what trains and reads it (chapters 9 and 11).

- ``registry``  every scheme a model can use, registered once (name, entry, modules)
- ``model``     the byte Transformer taking any registered scheme
- ``data``      the standard-library and Shakespeare byte corpora, scoring segments
- ``synthetic`` the look-back and passkey tasks (one key or several)
- ``train``     seeded training; bits per byte at several lengths and by position
- ``streaming`` bits per byte of a stream read with StreamingLLM's rolling cache (chapter 12)
- ``findings``  reading a recorded run: entries by name, gaps weighed against seeds
- ``verdicts``, ``run_verdicts``  paired verdicts, Holm families, read from records
- ``declared_families``  families of claims declared in an experiment file before its
                record is read

Modules here import from ``encodings``, ``attention`` and ``pages.glue``;
``pe_tutorial.experiments`` runs them.
"""
