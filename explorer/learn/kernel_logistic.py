"""Kernel logistic regression with missing-data kernels (marlin2008 section 5.6; thesis section 6.5).

:class:`KernelLogisticRegression` is multiclass (softmax) kernel logistic regression whose inputs
may contain NaN: the kernels of :mod:`explorer.core.classifiers.missing_kernels` read the response indicator
r (1 = observed) next to the values, so no imputation is needed.

Objective (eq. 6.5.2, solved in the primal, i.e. over the representer coefficients):

.. math::

    J(\\alpha, b) = \\sum_n \\Big[\\log \\sum_c e^{f_c(x_n)} - f_{y_n}(x_n)\\Big]
                    + \\frac{1}{2C} \\sum_c \\alpha_c^\\top K \\alpha_c,
    \\qquad f_c(x) = \\sum_{n'} \\alpha_{n'c} K(x_{n'}, x) + b_c,

so the thesis's penalty weight is :math:`\\gamma_{6.5.2} = 1/(2C)` (the name ``C`` follows
scikit-learn; ``gamma`` here is the kernel's response weight of eqs. 6.5.4-6.5.10). The intercepts
are not penalised.

**Solver.** The training Gram matrix is eigendecomposed, :math:`K = V\\Lambda V^\\top`; with the
kept eigenpairs (:math:`\\lambda > 10^{-10}\\lambda_{max}`) and the substitution
:math:`\\alpha_c = V\\Lambda^{-1/2}u_c` we have :math:`K\\alpha_c = \\Phi u_c`,
:math:`\\Phi = V\\Lambda^{1/2}` (the empirical kernel map) and :math:`\\alpha_c^\\top K\\alpha_c = u_c^\\top u_c`:
the same objective as a linear softmax regression on :math:`\\Phi` with a ridge penalty, minimised
by L-BFGS with the analytic gradient :math:`\\Phi^\\top(P - Y) + U/C`, :math:`\\mathbf 1^\\top(P - Y)`.
This is far better conditioned than L-BFGS directly on :math:`\\alpha` (whose Hessian involves
:math:`K^2`). Test rows get :math:`f(x_*) = k_*^\\top\\alpha + b`; because :math:`\\alpha` lies in the
span of the kept eigenvectors this equals :math:`(P k_*)^\\top\\alpha + b` with the projector P of
:func:`explorer.core.classifiers.missing_kernels.remove_negative_eigenvalues`, the consistent treatment of
test rows after negative eigenvalues were removed.

**Indefinite kernels.** With ``remove_negative=True`` (default, the thesis's fix) negative
eigenvalues of the training Gram matrix are dropped (:math:`K \\to V\\max(\\Lambda,0)V^\\top`); with
``remove_negative=False`` an indefinite Gram matrix is an error (the penalised objective would be
unbounded below).

**Equivalences (tested).** With two classes the softmax has two weight vectors; at the optimum
:math:`w_0 = -w_1`, so the penalty :math:`\\frac{1}{2C}(|w_0|^2 + |w_1|^2) = \\frac{1}{4C}|w_1 - w_0|^2`:

* ``kernel="linear"`` (:math:`K_l^o`, feature map :math:`x \\odot r`) with ``C`` equals binary
  ``LogisticRegression(C=2C)`` on zero-imputed inputs;
* ``kernel="linear", augmented=True`` (:math:`K_l^{o+r}`, feature map
  :math:`[x \\odot r, \\sqrt{\\gamma} r]`) with ``C`` and ``gamma=1`` equals the response-augmented
  LR (eq. 6.3.12, ``MissingInputClassifier(LogisticRegression(C=2C), "augmented")``); a general
  :math:`\\gamma` scales the penalty on the offsets v to :math:`v^\\top v/\\gamma`.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from explorer.core.classifiers import missing_kernels as mk
from explorer.core.validation import BadInputError
from explorer.learn._base import SupervisedMixin, check_finite_output, check_labels

__all__ = ["KernelLogisticRegression"]

#: Eigenvalues of the training Gram matrix below this fraction of the largest are dropped.
EIG_RTOL = 1e-10


class KernelLogisticRegression(SupervisedMixin, ClassifierMixin, BaseEstimator):
    """Multiclass kernel logistic regression on inputs with missing features (eq. 6.5.2).

    Parameters
    ----------
    kernel : {"gaussian", "polynomial", "linear"}, default "gaussian"
    augmented : bool, default False
        False: the "o" kernel (observed dimensions only); True: the "o+r" kernel, which also
        compares the response indicators (eqs. 6.5.4, 6.5.6, 6.5.9-6.5.10).
    sigma2 : float, default 2.0
        Gaussian width, :math:`\\exp(-D^2/\\sigma^2)` (thesis: :math:`\\sigma^2 = 2`).
    degree : int, default 2
        Polynomial degree :math:`\\delta`.
    kappa : float, default 1.0
        Polynomial offset :math:`\\kappa` (not given in the thesis).
    gamma : float or array-like (n_features,), default 1.0
        Response weight :math:`\\gamma` / :math:`\\gamma_d` of the o+r kernels; ``inf`` allowed for
        the Gaussian kernel (block-diagonal by pattern).
    C : float, default 1.0
        Inverse regularisation: penalty :math:`\\frac{1}{2C}\\sum_c\\alpha_c^\\top K\\alpha_c`.
    max_iter : int, default 1000
        L-BFGS iterations (thesis: at most 1000).
    tol : float, default 1e-6
        L-BFGS gradient tolerance.
    remove_negative : bool, default True
        Drop the negative eigenvalues of the training Gram matrix (thesis); False: error if any.

    Attributes
    ----------
    classes_, n_features_in_
    dual_coef_ : ndarray (n_train, n_classes) -- :math:`\\alpha`
    intercept_ : ndarray (n_classes,)
    X_fit_ : ndarray (n_train, n_features) -- training inputs (NaN = missing)
    n_negative_removed_ : int -- eigenvalues removed (negative beyond round-off)
    min_eigenvalue_ : float -- smallest eigenvalue of the training Gram matrix
    objective_ : float -- J at the solution
    n_iter_ : int
    converged_ : bool
    """

    def __init__(self, kernel="gaussian", augmented=False, sigma2=2.0, degree=2, kappa=1.0, gamma=1.0, C=1.0,
                 max_iter=1000, tol=1e-6, remove_negative=True):
        self.kernel = kernel
        self.augmented = augmented
        self.sigma2 = sigma2
        self.degree = degree
        self.kappa = kappa
        self.gamma = gamma
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.remove_negative = remove_negative

    def _check_params(self):
        if self.kernel not in mk.KERNELS:
            raise BadInputError(f"kernel must be one of {mk.KERNELS}, got {self.kernel!r}.")
        if not isinstance(self.augmented, (bool, np.bool_)):
            raise BadInputError(f"augmented must be True or False, got {self.augmented!r}.")
        if not isinstance(self.C, numbers.Real) or not np.isfinite(self.C) or self.C <= 0:
            raise BadInputError(f"C must be a finite positive number, got {self.C!r}.")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise BadInputError(f"max_iter must be a positive integer, got {self.max_iter!r}.")
        if not isinstance(self.tol, numbers.Real) or not self.tol > 0:
            raise BadInputError(f"tol must be a positive number, got {self.tol!r}.")

    def _gram(self, X1, X2) -> np.ndarray:
        return mk.gram(X1, ~np.isnan(X1), X2, ~np.isnan(X2), kernel=self.kernel, augmented=self.augmented,
                       sigma2=self.sigma2, degree=self.degree, kappa=self.kappa, gamma=self.gamma)

    def fit(self, X, y):
        """Minimise eq. 6.5.2 by L-BFGS on ``X`` (NaN = missing) and labels ``y``."""
        self._check_params()
        Xn, _ = self._fit_features(X)
        codes, classes = check_labels(y, Xn.shape[0])
        self.classes_ = classes
        n, n_classes = Xn.shape[0], len(classes)
        K = self._gram(Xn, Xn)
        lam, V = np.linalg.eigh((K + K.T) / 2.0)
        top = float(np.max(np.abs(lam)))
        self.min_eigenvalue_ = float(lam[0])
        negative = lam < -n * np.finfo(float).eps * top
        self.n_negative_removed_ = int(negative.sum())
        if negative.any() and not self.remove_negative:
            raise BadInputError(
                f"the training Gram matrix of the {self.kernel} kernel is indefinite (smallest eigenvalue "
                f"{lam[0]:.3g}); the penalised objective is then unbounded below. Use remove_negative=True.")
        keep = lam > EIG_RTOL * top
        Vk, sk = V[:, keep], np.sqrt(lam[keep])
        Phi = Vk * sk  # empirical kernel map: K_psd = Phi Phi^T
        Y = np.zeros((n, n_classes))
        Y[np.arange(n), codes] = 1.0
        r = Phi.shape[1]
        inv_C = 1.0 / float(self.C)

        def objective(theta):
            U = theta[: r * n_classes].reshape(r, n_classes)
            b = theta[r * n_classes:]
            F = Phi @ U + b
            lse = logsumexp(F, axis=1)
            value = float(np.sum(lse) - np.sum(F * Y) + 0.5 * inv_C * np.sum(U * U))
            G = np.exp(F - lse[:, None]) - Y
            grad = np.concatenate([(Phi.T @ G + inv_C * U).ravel(), G.sum(axis=0)])
            return value, grad

        theta0 = np.zeros(r * n_classes + n_classes)
        # the products are small: one BLAS thread is much faster on a busy machine (no oversubscription)
        with threadpool_limits(limits=1, user_api="blas"):
            res = minimize(objective, theta0, jac=True, method="L-BFGS-B",
                           options={"maxiter": int(self.max_iter), "gtol": float(self.tol), "ftol": 1e-14})
        U = res.x[: r * n_classes].reshape(r, n_classes)
        self.dual_coef_ = Vk @ (U / sk[:, None])
        self.intercept_ = res.x[r * n_classes:].copy()
        self.objective_ = float(res.fun)
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(res.success)
        self.X_fit_ = Xn
        return self

    def _scores(self, X) -> np.ndarray:
        """:math:`f_c(x) = \\sum_n \\alpha_{nc} K(x_n, x) + b_c`, shape (n_samples, n_classes)."""
        check_is_fitted(self, "dual_coef_")
        Xn, _ = self._predict_features(X)
        F = self._gram(Xn, self.X_fit_) @ self.dual_coef_ + self.intercept_
        return check_finite_output(F, "decision_function")

    def decision_function(self, X) -> np.ndarray:
        """The class scores :math:`f_c(x)`, shape (n_samples, n_classes); for two classes (scikit-learn's
        convention) the 1-D log-odds :math:`f_1(x) - f_0(x)`, positive for ``classes_[1]``."""
        F = self._scores(X)
        return F[:, 1] - F[:, 0] if F.shape[1] == 2 else F

    def predict_proba(self, X) -> np.ndarray:
        """Softmax of the class scores; rows sum to one."""
        F = self._scores(X)
        return np.exp(F - logsumexp(F, axis=1, keepdims=True))

    def predict(self, X) -> np.ndarray:
        """The most probable class."""
        codes = np.argmax(self._scores(X), axis=1)
        return self.classes_[codes]
