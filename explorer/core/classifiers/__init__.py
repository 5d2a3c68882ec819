r"""Classifiers with missing features: Gaussian discriminants (LDA / QDA / RDA, LDA-FA), the joint mixture over
features and label, kernels for inputs with missing features and Marlin's synthetic sets.

Modules (imported explicitly, nothing here is imported eagerly):

* :mod:`~explorer.core.classifiers.discriminant`: Gaussian discriminant classifiers (LDA, QDA, RDA) fitted to
  incomplete features by EM.
* :mod:`~explorer.core.classifiers.joint_mixture`: EM for a joint mixture over features and a class label,
  with missing features and missing labels.
* :mod:`~explorer.core.classifiers.lda_fa`: LDA with a factor-analysis covariance (LDA-FA) and missing
  features, generative or discriminative.
* :mod:`~explorer.core.classifiers.missing_kernels`: Kernels for inputs with missing features (marlin2008
  section 5.6; thesis section 6.5).
* :mod:`~explorer.core.classifiers.synthetic_classification`: Marlin's synthetic two-dimensional
  classification sets (marlin2008 section 6.4, thesis Ch. 6).
"""

__all__ = ["discriminant", "joint_mixture", "lda_fa", "missing_kernels", "synthetic_classification"]
