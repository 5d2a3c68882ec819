"""Kernels for inputs with missing features (marlin2008 section 5.6; thesis section 6.5).

Every kernel is a function :math:`K(x_i, r_i, x_j, r_j)` of two inputs and their **response
indicators** :math:`r` (Marlin's convention: :math:`r_d = 1` when :math:`x_d` is *observed*; this
library's ``missing`` mask is ``~r``). The functions below compute Gram matrices
``gram(X1, r1, X2, r2)`` of shape (n1, n2), vectorised with matrix products; the values of ``X``
at unobserved entries are ignored (they may be NaN). Use :func:`response` to get ``(x ⊙ r, r)``
from a matrix with NaN.

* ``K_l^o`` (6.5.3): :math:`\\sum_d r_{di} r_{dj} x_{di} x_{dj}`; positive semi-definite (PSD);
* ``K_l^{o+r}`` (6.5.4): :math:`\\sum_d r_{di} r_{dj} (x_{di} x_{dj} + \\gamma_d)`; PSD;
* ``K_p^o`` (6.5.5): :math:`(\\kappa + K_l^o)^\\delta`; PSD;
* ``K_p^{o+r}`` (6.5.6): :math:`(\\kappa + K_l^{o+r})^\\delta`; PSD;
* ``K_g^o`` (6.5.7-8): :math:`\\exp(-D^{o2}/\\sigma^2)`, :math:`D^{o2} = \\sum_d r_{di} r_{dj} (x_{di}-x_{dj})^2`;
  not PSD;
* ``K_g^{o+r}`` (6.5.9-10): :math:`\\exp(-D^{o+r,2}/\\sigma^2)`,
  :math:`D^{o+r,2} = D^{o2} + \\sum_d \\gamma_d (r_{di} - r_{dj})^2`; not PSD (PSD for γ_d = ∞).

:math:`\\gamma` may be a scalar or one value per dimension (:math:`\\gamma_d`; the thesis uses a
scalar for the linear and polynomial kernels and :math:`\\gamma_d`, e.g. :math:`\\gamma s_d^2` on
MNIST, for the Gaussian one). In the Gaussian o+r kernel :math:`\\gamma_d = \\infty` is allowed: two
inputs that differ in whether dimension d is observed then have similarity 0, and with every
:math:`\\gamma_d = \\infty` the Gram matrix is block-diagonal by missingness pattern (each block a
Gaussian Gram matrix on the pattern's observed dimensions, hence PSD): per-pattern KLR.
Note the Gaussian kernels use :math:`\\sigma^2`, not :math:`2\\sigma^2`, in the exponent (as printed).

**Indefinite kernels.** :math:`K_g^o` is not positive definite (:math:`D^o` violates the triangle
inequality; two inputs without a commonly observed dimension have similarity 1), nor is
:math:`K_g^{o+r}` for finite :math:`\\gamma_d`. The thesis removes the negative eigenvalues of the
Gram matrix (:func:`remove_negative_eigenvalues`). For *test* rows we use the consistent
projection: with the training eigendecomposition :math:`K = V\\Lambda V^\\top` and the projector
:math:`P = V\\,\\mathrm{diag}(1[\\lambda > \\epsilon])\\,V^\\top` onto the kept eigenspace, the clipped
training Gram matrix is :math:`\\tilde K = V\\max(\\Lambda, 0)V^\\top = KP` (the negative part
removed, up to the eigenvalues below :math:`\\epsilon`), and a test row's kernel vector
:math:`k_*` (n_train,) becomes :math:`\\tilde k_* = P k_*`, i.e. ``K_test @ P``. Applied to a training
row this reproduces its row of :math:`\\tilde K` (:math:`P k_n = (KP)_{:,n}` when :math:`\\epsilon`
= 0), so training and test predictions use the same function :math:`f(x) = \\tilde k(x)^\\top\\alpha + b`,
and the components of the kernel vector along the removed (negative) eigendirections are
discarded for every input alike. :math:`\\epsilon` is a relative tolerance that also drops the
round-off eigenvalues of a PSD matrix of low rank.
"""

from __future__ import annotations

import numpy as np

from explorer.core.validation import BadInputError

__all__ = [
    "KERNELS",
    "response",
    "linear_o",
    "linear_or",
    "polynomial_o",
    "polynomial_or",
    "gaussian_o",
    "gaussian_or",
    "gram",
    "remove_negative_eigenvalues",
    "psd_projector",
]

#: Kernel names accepted by :func:`gram` and (without the suffix) by KernelLogisticRegression.
KERNELS = ("linear", "polynomial", "gaussian")


def response(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x ⊙ r, r)`` of a matrix with NaN at the missing entries; r = 1.0 where observed."""
    X = np.asarray(X, dtype=float)
    r = ~np.isnan(X)
    return np.where(r, X, 0.0), r.astype(float)


def _prep(X, r, name):
    X = np.asarray(X, dtype=float)
    r = np.asarray(r)
    if X.ndim != 2:
        raise BadInputError(f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}.")
    if r.shape != X.shape:
        raise BadInputError(f"the response indicator of {name} has shape {r.shape}, expected {X.shape}.")
    r = r.astype(bool)
    xr = np.where(r, X, 0.0)
    if not np.isfinite(xr).all():
        raise BadInputError(f"{name} has infinite values (or NaN at entries marked observed).")
    return xr, r.astype(float)


def _pair(X1, r1, X2, r2):
    x1, r1 = _prep(X1, r1, "X1")
    x2, r2 = _prep(X2, r2, "X2")
    if x1.shape[1] != x2.shape[1]:
        raise BadInputError(f"X1 has {x1.shape[1]} features and X2 has {x2.shape[1]}.")
    return x1, r1, x2, r2


def _gamma(gamma, n_features, allow_inf=False) -> np.ndarray:
    g = np.broadcast_to(np.asarray(gamma, dtype=float), (n_features,)).copy() if np.ndim(gamma) == 0 \
        else np.asarray(gamma, dtype=float)
    if g.shape != (n_features,):
        raise BadInputError(f"gamma must be a scalar or have one value per feature ({n_features}); got {g.shape}.")
    if np.isnan(g).any() or (g < 0).any() or (not allow_inf and np.isinf(g).any()):
        what = "non-negative (inf allowed)" if allow_inf else "finite and non-negative"
        raise BadInputError(f"gamma must be {what}; got {gamma!r}.")
    return g


def linear_o(X1, r1, X2, r2) -> np.ndarray:
    """:math:`K_l^o = \\sum_d r_{di}r_{dj}x_{di}x_{dj}` (eq. 6.5.3): feature map :math:`x \\odot r`."""
    x1, _, x2, _ = _pair(X1, r1, X2, r2)
    return x1 @ x2.T


def linear_or(X1, r1, X2, r2, gamma=1.0) -> np.ndarray:
    """:math:`K_l^{o+r} = \\sum_d r_{di}r_{dj}(x_{di}x_{dj} + \\gamma_d)` (eq. 6.5.4).

    Feature map :math:`[x \\odot r, \\sqrt{\\gamma} \\odot r]`.
    """
    x1, q1, x2, q2 = _pair(X1, r1, X2, r2)
    g = _gamma(gamma, x1.shape[1])
    return x1 @ x2.T + (q1 * g) @ q2.T


def polynomial_o(X1, r1, X2, r2, degree=2, kappa=1.0) -> np.ndarray:
    """:math:`K_p^o = (\\kappa + K_l^o)^\\delta` (eq. 6.5.5)."""
    _check_poly(degree, kappa)
    return (kappa + linear_o(X1, r1, X2, r2)) ** degree


def polynomial_or(X1, r1, X2, r2, degree=2, kappa=1.0, gamma=1.0) -> np.ndarray:
    """:math:`K_p^{o+r} = (\\kappa + \\sum_d r_{di}r_{dj}(x_{di}x_{dj} + \\gamma_d))^\\delta` (eq. 6.5.6)."""
    _check_poly(degree, kappa)
    return (kappa + linear_or(X1, r1, X2, r2, gamma=gamma)) ** degree


def _check_poly(degree, kappa):
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise BadInputError(f"degree must be a positive integer, got {degree!r}.")
    if not np.isfinite(kappa) or kappa < 0:
        raise BadInputError(f"kappa must be a finite number >= 0 (keeps the kernel PSD), got {kappa!r}.")


def _sq_dist_o(x1, q1, x2, q2) -> np.ndarray:
    """:math:`D^{o2}_{ij} = \\sum_d r_{di}r_{dj}(x_{di}-x_{dj})^2` by three matrix products."""
    d2 = (x1**2) @ q2.T + q1 @ (x2**2).T - 2.0 * (x1 @ x2.T)
    return np.maximum(d2, 0.0)


def _check_sigma2(sigma2):
    if not np.isfinite(sigma2) or sigma2 <= 0:
        raise BadInputError(f"sigma2 must be a finite positive number, got {sigma2!r}.")


def gaussian_o(X1, r1, X2, r2, sigma2=2.0) -> np.ndarray:
    """:math:`K_g^o = \\exp(-D^{o2}/\\sigma^2)` (eqs. 6.5.7-6.5.8); not positive definite in general."""
    _check_sigma2(sigma2)
    x1, q1, x2, q2 = _pair(X1, r1, X2, r2)
    return np.exp(-_sq_dist_o(x1, q1, x2, q2) / sigma2)


def gaussian_or(X1, r1, X2, r2, sigma2=2.0, gamma=1.0) -> np.ndarray:
    """:math:`K_g^{o+r} = \\exp(-[D^{o2} + \\sum_d \\gamma_d (r_{di}-r_{dj})^2]/\\sigma^2)` (eqs. 6.5.9-6.5.10).

    ``gamma`` may contain ``inf``: a mismatch of r in such a dimension gives similarity 0
    (block-diagonal by pattern when every :math:`\\gamma_d = \\infty`).
    """
    _check_sigma2(sigma2)
    x1, q1, x2, q2 = _pair(X1, r1, X2, r2)
    g = _gamma(gamma, x1.shape[1], allow_inf=True)
    fin = np.isfinite(g)
    gf = np.where(fin, g, 0.0)
    # sum_d g_d (r_i - r_j)^2 = sum_d g_d (r_i + r_j - 2 r_i r_j) for binary r
    pen = (q1 @ gf)[:, None] + (q2 @ gf)[None, :] - 2.0 * (q1 * gf) @ q2.T
    K = np.exp(-(_sq_dist_o(x1, q1, x2, q2) + np.maximum(pen, 0.0)) / sigma2)
    if (~fin).any():
        a, b = q1[:, ~fin], q2[:, ~fin]
        mismatch = a @ (1.0 - b).T + (1.0 - a) @ b.T  # number of infinite-gamma dims where r differs
        K = np.where(mismatch > 0, 0.0, K)
    return K


def gram(X1, r1, X2, r2, kernel="gaussian", augmented=False, *, sigma2=2.0, degree=2, kappa=1.0,
         gamma=1.0) -> np.ndarray:
    """The Gram matrix of one of the six kernels by name.

    Parameters
    ----------
    X1, X2 : ndarray (n1, D), (n2, D)
        Inputs; entries with r = 0 are ignored (may be NaN).
    r1, r2 : ndarray of bool/0-1 (n1, D), (n2, D)
        Response indicators, **1 = observed** (Marlin's r; ``r = ~missing``).
    kernel : {"linear", "polynomial", "gaussian"}
    augmented : bool
        False: the "o" kernel; True: the "o+r" kernel (uses ``gamma``).
    sigma2, degree, kappa, gamma : kernel parameters (see the individual functions).
    """
    if kernel == "linear":
        return linear_or(X1, r1, X2, r2, gamma) if augmented else linear_o(X1, r1, X2, r2)
    if kernel == "polynomial":
        return (polynomial_or(X1, r1, X2, r2, degree, kappa, gamma) if augmented
                else polynomial_o(X1, r1, X2, r2, degree, kappa))
    if kernel == "gaussian":
        return gaussian_or(X1, r1, X2, r2, sigma2, gamma) if augmented else gaussian_o(X1, r1, X2, r2, sigma2)
    raise BadInputError(f"kernel must be one of {KERNELS}, got {kernel!r}.")


def _eig(K: np.ndarray, rtol: float):
    K = np.asarray(K, dtype=float)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise BadInputError(f"K must be a square matrix; got shape {K.shape}.")
    if not np.isfinite(K).all():
        raise BadInputError("K has non-finite entries.")
    lam, V = np.linalg.eigh((K + K.T) / 2.0)
    tol = rtol * max(float(np.max(np.abs(lam))) if lam.size else 0.0, 0.0)
    return lam, V, lam > tol


def psd_projector(K, rtol: float | None = None) -> np.ndarray:
    """:math:`P = V\\,\\mathrm{diag}(1[\\lambda > \\epsilon])\\,V^\\top` for the symmetric matrix ``K``.

    ``rtol`` (relative to the largest absolute eigenvalue) defaults to ``n * machine epsilon``.
    Test kernel rows are made consistent with :func:`remove_negative_eigenvalues` by ``K_test @ P``.
    """
    K = np.asarray(K, dtype=float)
    rtol = K.shape[0] * np.finfo(float).eps if rtol is None else rtol
    _, V, keep = _eig(K, rtol)
    Vk = V[:, keep]
    return Vk @ Vk.T


def remove_negative_eigenvalues(K, rtol: float | None = None, return_projector: bool = False):
    """The thesis's fix for an indefinite Gram matrix: clip its negative eigenvalues to zero.

    Parameters
    ----------
    K : ndarray (n, n), symmetric
    rtol : float or None
        Eigenvalues at or below ``rtol * max|lambda|`` are removed (default ``n * eps``, i.e.
        exactly the negative ones up to round-off).
    return_projector : bool
        Also return the projector P onto the kept eigenspace (for test rows: ``K_test @ P``,
        see the module docstring).

    Returns
    -------
    K_psd : ndarray (n, n)
        :math:`V\\max(\\Lambda, 0)V^\\top` (eigenvalues below the tolerance set to 0), symmetric PSD.
    P : ndarray (n, n)
        Only with ``return_projector``.
    """
    K = np.asarray(K, dtype=float)
    rtol = K.shape[0] * np.finfo(float).eps if rtol is None else rtol
    lam, V, keep = _eig(K, rtol)
    Vk = V[:, keep]
    K_psd = (Vk * lam[keep]) @ Vk.T
    K_psd = (K_psd + K_psd.T) / 2.0
    if return_projector:
        return K_psd, Vk @ Vk.T
    return K_psd
