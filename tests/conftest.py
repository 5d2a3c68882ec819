"""Shared pytest setup for the whole suite (kept light: no Panel/HoloViews import here).

* Hypothesis profiles: ``explorer`` (default; no per-example deadline, because the CI machine
  has 2 cores and timings are noisy) and ``ci`` (same, plus derandomised so CI runs are
  reproducible). ``ci`` is picked when ``CI`` is set; ``HYPOTHESIS_PROFILE`` overrides both.
* Fixtures: ``repo_root`` (Path of the checkout) and ``rng`` (a seeded
  ``numpy.random.Generator``; test files may define their own ``rng`` to change the seed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

try:
    from hypothesis import settings
except ImportError:  # pragma: no cover - hypothesis is in the [test] extra
    settings = None

if settings is not None:
    settings.register_profile("explorer", deadline=None, print_blob=True)
    settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
    settings.load_profile(
        os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "explorer")
    )


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """Root of the repository (the directory holding pyproject.toml)."""
    return REPO_ROOT


@pytest.fixture
def rng():
    """A fresh ``numpy.random.Generator`` with a fixed seed, one per test."""
    import numpy as np

    return np.random.default_rng(20240607)
