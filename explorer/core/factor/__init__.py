r"""Factor models with missing values: factor analysis / PPCA, mixtures of factor analysers, the conditional
factor model of a row and the scaled Neumann series (antypas2023).

Modules (imported explicitly, nothing here is imported eagerly):

* :mod:`~explorer.core.factor.fa_conditional`: A factor model conditioned on the observed entries of every
  row.
* :mod:`~explorer.core.factor.factor_augmentation`: Bayesian data augmentation (Gibbs sampling) of factor
  analysers / mixtures of factor analysers on incomplete data under a weak conjugate prior.
* :mod:`~explorer.core.factor.factor_analysis`: Factor analysis and PPCA on complete data and with missing
  values (exact EM).
* :mod:`~explorer.core.factor.mfa`: Mixtures of factor analysers / of PPCA (MFA / MPPCA), fitted by EM on
  complete or incomplete data.
* :mod:`~explorer.core.factor.mfa_neumann`: Encoding rows with missing entries under a mixture of factor
  analysers: exact and NSA-M.
* :mod:`~explorer.core.factor.neumann`: Encoders of rows with missing entries under a factor model, and the
  scaled Neumann series (NSA).
"""

__all__ = ["fa_conditional", "factor_analysis", "factor_augmentation", "mfa", "mfa_neumann", "neumann"]
