r"""Gaussians observed on a subset of coordinates: marginals, conditionals of mixtures (plug-in and Student-t),
missingness patterns, mixture regression.

Modules (imported explicitly, nothing here is imported eagerly):

* :mod:`~explorer.core.gaussians.conditional`: Density imputation: :math:`p(x^m \mid x^o)` of every row as a
  Gaussian mixture.
* :mod:`~explorer.core.gaussians.conditional_t`: Density imputation with Student-t mixtures: the posterior
  predictive of the variational DP mixture.
* :mod:`~explorer.core.gaussians.gaussian`: Gaussians observed on a subset of coordinates: marginal log-
  densities and conditionals.
* :mod:`~explorer.core.gaussians.mixture_regression`: Regression from a joint Gaussian mixture: what
  :func:`explorer.core.gaussians.conditional.regression` leaves out.
* :mod:`~explorer.core.gaussians.patterns`: Group the rows of an incomplete data matrix by their missingness.
"""

__all__ = ["conditional", "conditional_t", "gaussian", "mixture_regression", "patterns"]
