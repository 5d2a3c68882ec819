r"""The compiled (numba) kernels of the core, the only place numba is imported.

Each module is imported lazily, inside the function of its algorithm module that needs it, so ``import
explorer`` never loads numba. The algorithm modules keep the numpy references the tests compare the kernels
with, where there is one.

* ``gmm``: the E-step of EM for full-covariance Gaussian mixtures with missing values
  (:mod:`explorer.core.mixtures.em_gmm`, through :func:`explorer.core.mixtures.suffstats.estep_statistics`);
* ``vb_dpgmm``: the E-step of the variational DP mixture (:mod:`explorer.core.mixtures.vb_dpgmm`) on ``gmm``'s
  layout and workspace;
* ``draws``: the I-step of the data-augmentation chains, each row's gaps drawn from its drawn component
  (:mod:`explorer.core.mixtures.gap_draws`);
* ``factor``: the E-step and M-step sums of factor analysis / PPCA (:mod:`explorer.core.factor.factor_analysis`);
* ``pattern_tree``: Prim's tree, the incremental Cholesky updates and small triangular solves of
  :mod:`explorer.core.mixtures.pattern_tree`;
* ``dp_multinomial`` and ``dp_cpt_v``: the Gibbs sweeps of :mod:`explorer.core.discrete.dp_multinomial` and
  :mod:`explorer.core.discrete.dp_cpt_v`;
* ``crbm``: the leave-one-out predictive of :mod:`explorer.core.discrete.crbm`.

:func:`loaded` tells the ``strategy="auto"`` rules whether a kernel module has already run in this process: its
one-time cost (importing numba and loading the cached machine code, 0.3-0.7 s; compiling it, seconds) is then
paid, and the compiled kernels were faster per step than the numpy ones at every size measured but one (wide rows
with about 100 missing entries each, where the covariance side is used instead, see
``results/bench_em_wide.md``), so the rules then take them whatever the size of the work.

:func:`drop_stale_cache` keeps numba's on-disk cache honest for the modules that inline another module's kernels
(``vb_dpgmm`` and ``factor`` use ``gmm``'s): numba keys a module's cached machine code on that module's own source
file only, so after an edit of ``gmm.py`` alone they would keep running the old copy.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["compiled_or_numpy", "drop_stale_cache", "loaded", "mark_loaded"]

_LOADED: set[str] = set()


def mark_loaded(name: str) -> None:
    """Record that kernel module ``name`` (e.g. ``"gmm"``) ran once in this process (called by its entry point)."""
    _LOADED.add(name)


def loaded(name: str) -> bool:
    """True once kernel module ``name`` has run in this process (never imports it, nor numba)."""
    return name in _LOADED


def compiled_or_numpy(name: str, work: float, min_work: float, ready: bool | None = None) -> str:
    """The ``strategy="auto"`` choice between kernel module ``name`` and numpy: ``"compiled"`` when ``name`` has
    already run in this process (``ready`` overrides that) or ``work`` is at least ``min_work``, and the module
    imports (numba is a dependency, so it does); else ``"numpy"``."""
    if work < min_work and not (loaded(name) if ready is None else ready):
        return "numpy"
    try:
        import importlib

        importlib.import_module(f"explorer.core._compiled.{name}")
    except ImportError:  # pragma: no cover - numba is a dependency
        return "numpy"
    return "compiled"


def drop_stale_cache(module_file: str, *depends_on: str) -> bool:
    """Delete the on-disk numba cache of ``module_file``'s kernels when a module they inline from (``depends_on``,
    names of sibling modules, e.g. ``"gmm"``) has changed since that cache was written. Returns True when it deleted
    something.

    Numba invalidates a module's cache when that module's own file changes, not when a function it inlines from
    another file does. A fingerprint of the ``depends_on`` sources is kept next to the cache
    (``__pycache__/<module>.depends``); when it is missing or differs, the module's ``*.nbi`` / ``*.nbc`` files are
    deleted (recompiled at the next call) and the fingerprint rewritten. Only the in-tree ``__pycache__`` is
    handled: an install whose package directory is read-only caches elsewhere and gets every file new on an
    upgrade anyway. Errors of the file system (read-only, a race with another process) are ignored: the cache is an
    optimisation.
    """
    here = Path(module_file).resolve()
    cache = here.parent / "__pycache__"
    try:
        digest = hashlib.sha256(b"".join((here.parent / f"{name}.py").read_bytes() for name in depends_on)).hexdigest()
        stamp = cache / f"{here.stem}.depends"
        if stamp.is_file() and stamp.read_text() == digest:
            return False
        dropped = False
        for old in cache.glob(f"{here.stem}.*.nb[ic]"):
            old.unlink(missing_ok=True)
            dropped = True
        cache.mkdir(exist_ok=True)
        partial = cache / f"{here.stem}.depends.{os.getpid()}"
        partial.write_text(digest)
        partial.replace(stamp)  # atomic: another process reads the old fingerprint or the new one
        return dropped
    except OSError:
        return False
