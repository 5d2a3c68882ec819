r"""Gaussian mixtures on incomplete data: EM (:mod:`.em_gmm`), its conjugate prior (:mod:`.prior`), the expected
sufficient statistics and their one E-step dispatcher (:mod:`.suffstats`), the pattern tree of delalleau2012,
the variational DP mixture, k-means initialisation and the logistic self-masking selection model.

Modules (imported explicitly, nothing here is imported eagerly):

* :mod:`~explorer.core.mixtures.covariance_side`: The covariance-side E-step: factor each pattern's observed block
  instead of the missing block of the precision.
* :mod:`~explorer.core.mixtures.data_augmentation`: Bayesian data augmentation for the Gaussian mixture on
  incomplete data: draws of the parameters and of the gaps.
* :mod:`~explorer.core.mixtures.em_gmm`: EM for Gaussian mixtures on data with missing values.
* :mod:`~explorer.core.mixtures.gap_draws`: The I-step of the data-augmentation chains on the compiled kernels:
  labels, then each row's gaps from its label.
* :mod:`~explorer.core.mixtures.gaussian_selection`: A selection model for the Gaussian mixture: logistic
  self-masking, fitted jointly with the mixture.
* :mod:`~explorer.core.mixtures.kmeans`: k-means(++) on incomplete data, used to initialise the mixture
  models.
* :mod:`~explorer.core.mixtures.location_augmentation`: Bayesian data augmentation for the location model:
  posterior draws of its parameters and of the gaps.
* :mod:`~explorer.core.mixtures.location_model`: The location model for mixed data: a mixture whose components hold
  a Gaussian for the numeric columns and a categorical distribution per categorical column.
* :mod:`~explorer.core.mixtures.pattern_tree`: Delalleau, Courville & Bengio's tree-ordered E-step for full-
  covariance Gaussians (delalleau2012).
* :mod:`~explorer.core.mixtures.prior`: The conjugate prior of the Gaussian mixtures: Normal-inverse-Wishart (MAP-EM,
  Fraley & Raftery 2007).
* :mod:`~explorer.core.mixtures.suffstats`: Expected sufficient statistics of EM for Gaussian mixtures with
  missing values.
* :mod:`~explorer.core.mixtures.vb_dpgmm`: Variational Dirichlet-process Gaussian mixture on incomplete data
  (the POIGMM).
"""

__all__ = ["covariance_side", "data_augmentation", "em_gmm", "gap_draws", "gaussian_selection", "kmeans", "location_augmentation", "location_model", "pattern_tree", "prior", "suffstats", "vb_dpgmm"]
