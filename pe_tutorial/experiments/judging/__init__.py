"""``judge``: a reader's own scheme through chapter 9's protocol.

The top room of ``experiments``: it configures stages, runs them, and reads
their records with the rooms below.

- ``judge`` the stages (each an experiment file), the baselines reused from the
            package's records or trained again, and the judged record and card
"""
