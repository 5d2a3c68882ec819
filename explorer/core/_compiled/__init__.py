r"""The compiled (numba) kernels of the core, the only place numba is imported. Each module is imported lazily,
inside the function that needs it, so ``import explorer`` never loads numba; every kernel has a numpy
reference in its algorithm module that the tests compare it with.

Modules (imported explicitly, nothing here is imported eagerly):

* :mod:`~explorer.core._compiled.dp_multinomial`: Compiled sweep of the collapsed Gibbs sampler of the DP
  multinomial mixture (numba).
* :mod:`~explorer.core._compiled.factor`: Compiled E-step and M-step statistics of EM for factor analysis /
  PPCA with missing values (numba).
* :mod:`~explorer.core._compiled.gmm`: Compiled E-step of EM for full-covariance Gaussian mixtures with
  missing values (numba).
* :mod:`~explorer.core._compiled.vb_dpgmm`: Compiled E-step of the variational DP mixture
  (:mod:`explorer.core.mixtures.vb_dpgmm`), on the machinery of :mod:`explorer.core._compiled.gmm` (numba,
  imported lazily).
"""
