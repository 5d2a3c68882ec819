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
"""
