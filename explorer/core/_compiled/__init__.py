r"""The compiled (numba) kernels of the core, the only place numba is imported.

Each module is imported lazily, inside the function of its algorithm module that needs it, so ``import
explorer`` never loads numba. The algorithm modules keep the numpy references the tests compare the kernels
with, where there is one.

* ``gmm``: the E-step of EM for full-covariance Gaussian mixtures with missing values
  (:mod:`explorer.core.mixtures.em_gmm`, through :func:`explorer.core.mixtures.suffstats.estep_statistics`);
* ``vb_dpgmm``: the E-step of the variational DP mixture (:mod:`explorer.core.mixtures.vb_dpgmm`) on ``gmm``'s
  layout and workspace;
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
"""

from __future__ import annotations

__all__ = ["compiled_or_numpy", "loaded", "mark_loaded"]

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
