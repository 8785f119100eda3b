"""Shared test setup."""

import os

import torch

# Under pytest-xdist every worker is a process of its own; with torch's default of one
# intra-op thread per core, two workers on two cores oversubscribe the machine and the
# OpenMP threads spin against each other (the small training tests ran 12 times slower).
# One thread per worker keeps each process on its own core.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
