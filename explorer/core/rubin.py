"""Rubin's rules: pooling the analyses of M multiply imputed data sets (Rubin 1987; van Buuren 2018, §2.3).

Moved here from :mod:`explorer.learn.treatments` (which re-exports both names) so that numpy-only
code (:mod:`explorer.core.missingness.sensitivity`) can pool too; numpy only.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from explorer.core.validation import BadInputError

__all__ = ["PooledEstimate", "rubin_pool"]


@dataclass(frozen=True)
class PooledEstimate:
    """Rubin's rules for S completed-data analyses (Rubin 1987; van Buuren 2018, section 2.3).

    Attributes
    ----------
    estimate : ndarray (p,)
        Pooled estimate :math:`\\bar Q = \\frac1S \\sum_s \\hat Q_s`.
    within : ndarray (p,)
        Within-imputation variance :math:`\\bar U = \\frac1S \\sum_s U_s` (diagonal).
    between : ndarray (p,)
        Between-imputation variance :math:`B = \\frac{1}{S-1} \\sum_s (\\hat Q_s - \\bar Q)^2`.
    total : ndarray (p,)
        Total variance :math:`T = \\bar U + (1 + 1/S) B`.
    std_error : ndarray (p,)
        :math:`\\sqrt T`.
    riv : ndarray (p,)
        Relative increase in variance :math:`r = (1 + 1/S) B / \\bar U`.
    lambda_ : ndarray (p,)
        Proportion of the variance due to the missing data, :math:`\\lambda = (1 + 1/S) B / T`.
    df : ndarray (p,)
        Degrees of freedom: Rubin's :math:`\\nu_{old} = (S-1)/\\lambda^2`, combined with the
        complete-data degrees of freedom by Barnard & Rubin (1999) when ``df_complete`` is given:
        :math:`\\nu_{obs} = \\frac{\\nu_{com}+1}{\\nu_{com}+3}\\nu_{com}(1-\\lambda)`,
        :math:`\\nu = \\nu_{old}\\nu_{obs}/(\\nu_{old}+\\nu_{obs})` (inf when B = 0 and no ``df_complete``).
    fmi : ndarray (p,)
        Fraction of missing information :math:`\\gamma = (r + 2/(\\nu + 3)) / (1 + r)`.
    within_cov, between_cov, total_cov : ndarray (p, p)
        The same three variances as matrices (multivariate Rubin's rules).
    n_imputations : int
    """

    estimate: np.ndarray
    within: np.ndarray
    between: np.ndarray
    total: np.ndarray
    std_error: np.ndarray
    riv: np.ndarray
    lambda_: np.ndarray
    df: np.ndarray
    fmi: np.ndarray
    within_cov: np.ndarray
    between_cov: np.ndarray
    total_cov: np.ndarray
    n_imputations: int


def rubin_pool(estimates, covariances, df_complete: float | None = None) -> PooledEstimate:
    """Pool S completed-data estimates by Rubin's rules.

    Parameters
    ----------
    estimates : array-like (S, p)
        The estimate :math:`\\hat Q_s` of every completed data set (S >= 2).
    covariances : array-like (S, p, p) or (S, p)
        Their sampling covariance matrices :math:`U_s` (or only the variances).
    df_complete : float or None
        Complete-data degrees of freedom :math:`\\nu_{com}` (e.g. n - p for a regression) for the
        Barnard-Rubin small-sample correction; None uses Rubin's large-sample :math:`\\nu_{old}`.

    Returns
    -------
    PooledEstimate
    """
    Q = np.asarray(estimates, dtype=float)
    if Q.ndim == 1:
        Q = Q[:, None]
    if Q.ndim != 2 or Q.shape[0] < 2:
        raise BadInputError(f"estimates must have shape (S, p) with S >= 2 imputations; got shape {Q.shape}.")
    S, p = Q.shape
    U = np.asarray(covariances, dtype=float)
    if U.shape == (S,) and p == 1:
        U = U[:, None]
    if U.shape == (S, p):
        U = np.stack([np.diag(u) for u in U])
    if U.shape != (S, p, p):
        raise BadInputError(f"covariances must have shape (S, p, p) or (S, p) = ({S}, {p}); got {U.shape}.")
    if not (np.isfinite(Q).all() and np.isfinite(U).all()):
        raise BadInputError("estimates and covariances must be finite.")
    estimate = Q.mean(axis=0)
    within_cov = U.mean(axis=0)
    dev = Q - estimate
    between_cov = dev.T @ dev / (S - 1)
    total_cov = within_cov + (1.0 + 1.0 / S) * between_cov
    within, between, total = np.diag(within_cov).copy(), np.diag(between_cov).copy(), np.diag(total_cov).copy()
    extra = (1.0 + 1.0 / S) * between
    with np.errstate(divide="ignore", invalid="ignore"):
        riv = np.where(within > 0, extra / within, np.where(extra > 0, np.inf, 0.0))
        lam = np.where(total > 0, extra / total, 0.0)
        df_old = np.where(lam > 0, (S - 1) / lam**2, np.inf)
        if df_complete is not None:
            if not (isinstance(df_complete, numbers.Real) and df_complete > 0):
                raise BadInputError(f"df_complete must be a positive number, got {df_complete!r}.")
            nu = float(df_complete)
            df_obs = (nu + 1.0) / (nu + 3.0) * nu * (1.0 - lam)
            df = np.where(np.isinf(df_old), df_obs, df_old * df_obs / (df_old + df_obs))
        else:
            df = df_old
        fmi = np.where(np.isfinite(riv), (riv + 2.0 / (df + 3.0)) / (1.0 + riv), 1.0)
    return PooledEstimate(estimate=estimate, within=within, between=between, total=total,
                          std_error=np.sqrt(total), riv=riv, lambda_=lam, df=df, fmi=fmi,
                          within_cov=within_cov, between_cov=between_cov, total_cov=total_cov,
                          n_imputations=S)
