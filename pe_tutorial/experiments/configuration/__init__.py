"""What a run is asked to do: an experiment as a preset, a TOML file or flags, checked.

The lowest room of ``experiments``: it imports nothing from the rooms above
(``records``, ``running``, ``viewing``, ``judging``).

- ``presets``       ``Preset``, ``Variant``: what a run does, its variants and sweeps
- ``config_fields`` the fields a file may set, their types, and ``ExperimentError``
- ``config_checks`` the checks a preset passes before anything trains
- ``config``        an experiment as a TOML file or flags, checked; ``PRESETS``
                    (the shipped files in ``experiments/presets/``)
- ``scheme_files``  a reader's own scheme, from a Python file, registered and probed
- ``tuning``        each scheme's training chosen from the recorded sweeps
- ``tuning_edges``  the judge's sweep going on beyond a grid edge its best sits at
- ``toml_text``     a preset written back as TOML (the judge's stage files)
- ``arguments``     the ``--jobs`` and ``--shard`` flags the commands share
"""
