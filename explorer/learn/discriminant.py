"""Gaussian discriminant classifiers for incomplete features (Marlin 2008, chapter 6.2).

scikit-learn estimators around :mod:`explorer.core.classifiers.discriminant` and
:mod:`explorer.core.classifiers.lda_fa`. ``X`` may contain NaN, in training and at prediction, in any pattern: the
classifiers are generative, so a missing feature is integrated out, :math:`P(y = c \\mid x^o) \\propto \\theta_c
N(x^o; \\mu_c^o, \\Sigma_c^{oo})` (6.2.21); a row with nothing observed gets the class prior. The labels must be
complete.

* :class:`LDAClassifier`: shared covariance, fitted by EM (maximum likelihood on the observed data).
* :class:`QDAClassifier`: one covariance per class, by EM.
* :class:`RDAClassifier`: Friedman's blend (6.2.19) inside the EM's M-step; choose ``alpha`` and
  ``gamma`` by cross-validation, e.g.
  ``GridSearchCV(RDAClassifier(), {"alpha": [0, .5, 1], "gamma": [.5, 1]}, scoring="neg_log_loss")``.
* :class:`LDAFAClassifier`: shared covariance :math:`\\Lambda\\Lambda^\\top + \\Psi` with ``n_factors``
  factors, trained generatively (two stages) or discriminatively (conditional log-likelihood by
  L-BFGS-B, started from the generative fit).

Example
-------
>>> import numpy as np
>>> from explorer.learn.discriminant import LDAClassifier
>>> rng = np.random.default_rng(0)
>>> X = np.vstack([rng.normal(-1, 1, (50, 2)), rng.normal(1, 1, (50, 2))])
>>> y = np.repeat([0, 1], 50)
>>> X[rng.random(X.shape) < 0.3] = np.nan
>>> clf = LDAClassifier().fit(X, y)
>>> clf.predict_proba([[np.nan, np.nan]]).round(2).tolist()  # nothing observed: the class prior
[[0.5, 0.5]]
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from explorer.core.classifiers import discriminant as _dm
from explorer.core.classifiers import lda_fa as _lf
from explorer.core.loop import ConvergenceWarning
from explorer.core.validation import BadInputError
from explorer.utils.random_state import check_random_state

from ._base import SupervisedMixin, check_finite_output, check_labels

__all__ = ["LDAClassifier", "QDAClassifier", "RDAClassifier", "LDAFAClassifier"]

TRAINING = ("generative", "discriminative")


def _labels(y, n_samples: int):
    """``(codes, classes)`` of complete class labels: ``-1`` is an ordinary label here (these classifiers are
    fully supervised), NaN / None are errors (:func:`explorer.learn._base.check_labels`)."""
    return check_labels(y, n_samples)


class _DiscriminantBase(SupervisedMixin, ClassifierMixin, BaseEstimator):
    """fit / predict_log_proba / predict_proba / predict shared by the classifiers here."""

    def _prepare(self, X, y):
        Xn, missing = self._fit_features(X)
        codes, classes = _labels(y, Xn.shape[0])
        data = _dm.prepare(Xn, codes, missing, n_classes=classes.size)
        self.classes_ = classes
        return Xn, missing, data

    def predict_log_proba(self, X):
        """:math:`\\log P(y = c \\mid x^o)` (n_samples, n_classes), missing features marginalised (6.2.21)."""
        Xn, missing = self._predict_features(X)
        out = _dm.class_log_posterior(Xn, self.priors_, self._fit_means(), self._fit_covariances(), missing)
        return check_finite_output(out, "predict_log_proba")

    def predict_proba(self, X):
        """:math:`P(y = c \\mid x^o)` (n_samples, n_classes); rows sum to one."""
        p = np.exp(self.predict_log_proba(X))
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X):
        """The most probable class of every row."""
        lp = self.predict_log_proba(X)
        return self.classes_[np.argmax(lp, axis=1)]

    def _fit_means(self):
        return self.means_

    def _fit_covariances(self):
        return self.covariances_


class _EMDiscriminant(_DiscriminantBase):
    _model = "lda"

    def _config(self):
        return _dm.DiscriminantConfig(model=self._model, alpha=getattr(self, "alpha", 0.5),
                                      gamma=getattr(self, "gamma", 0.5), reg_covar=self.reg_covar, tol=self.tol,
                                      max_iter=self.max_iter)

    def fit(self, X, y):
        """Fit the class priors, means and covariances by EM on the observed features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN marks a missing feature (rows with nothing observed are allowed).
        y : array-like of shape (n_samples,)
            Class labels (complete; at least two classes).

        Returns
        -------
        self
        """
        config = self._config()  # validates the parameters
        _, _, data = self._prepare(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = _dm.fit(data, config)
        if not res.converged:
            warnings.warn(f"{type(self).__name__}: {res.message}", ConvergenceWarning, stacklevel=2)
        s = res.state
        self.priors_ = np.array(s.priors)
        self.means_ = np.array(s.means)
        self.covariances_ = np.array(s.covariances)
        self.log_likelihood_ = float(s.log_likelihood)
        self.n_iter_ = int(res.n_iter)
        self.converged_ = bool(res.converged)
        return self


_EM_PARAMS = """
    reg_covar : float, default 1e-6
        Added to the diagonal of every covariance after each M-step (>= 0).
    max_iter : int, default 200
        Maximum number of EM iterations.
    tol : float, default 1e-6
        Stop when the observed-data log-likelihood changes by less than ``tol`` per row.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    priors_ : ndarray (n_classes,)
        Class proportions :math:`\\theta_c`.
    means_ : ndarray (n_classes, n_features)
    covariances_ : ndarray (n_classes, n_features, n_features)
    log_likelihood_ : float
        Observed-data log-likelihood of the fit (sum over rows, labels included).
    n_iter_ : int
    converged_ : bool
    n_features_in_ : int
    feature_names_in_ : ndarray (only for named columns)
"""


class LDAClassifier(_EMDiscriminant):
    __doc__ = """Linear discriminant analysis with missing features (shared covariance, EM; Marlin 6.2.1-6.2.3).

    With complete data the fit is the ML one (class means, pooled covariance with divisor N): the
    posteriors equal scikit-learn's ``LinearDiscriminantAnalysis(solver="lsqr")``. With missing data EM
    maximises the observed-data log-likelihood; prediction marginalises the missing features.

    Parameters
    ----------""" + _EM_PARAMS + """    covariance_ : ndarray (n_features, n_features)
        The shared covariance.
    """
    _model = "lda"

    def __init__(self, reg_covar=1e-6, max_iter=200, tol=1e-6):
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, y):
        super().fit(X, y)
        self.covariance_ = self.covariances_[0].copy()
        return self

    fit.__doc__ = _EMDiscriminant.fit.__doc__


class QDAClassifier(_EMDiscriminant):
    __doc__ = """Quadratic discriminant analysis with missing features (one covariance per class, EM; 6.2.4).

    With complete data the posteriors equal scikit-learn's ``QuadraticDiscriminantAnalysis(reg_param=0)``
    (both use the ML class covariances, divisor N_c).

    Parameters
    ----------""" + _EM_PARAMS
    _model = "qda"

    def __init__(self, reg_covar=1e-6, max_iter=200, tol=1e-6):
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.tol = tol


class RDAClassifier(_EMDiscriminant):
    __doc__ = """Regularised discriminant analysis (Friedman; Marlin 6.2.19) with missing features.

    :math:`\\Sigma_c = \\gamma(\\alpha S_c + (1-\\alpha) S) + \\frac{1-\\gamma}{D}\\operatorname{tr}(S) I`,
    applied in every M-step of the EM (see :mod:`explorer.core.classifiers.discriminant`): ``alpha=1, gamma=1`` is
    :class:`QDAClassifier`, ``alpha=0, gamma=1`` is :class:`LDAClassifier`. Choose ``alpha`` and ``gamma``
    by cross-validation (the thesis uses leave-one-out over a grid)::

        GridSearchCV(RDAClassifier(), {"alpha": [0, 0.5, 1], "gamma": [0.5, 1]}, scoring="neg_log_loss")

    Parameters
    ----------
    alpha : float in [0, 1], default 0.5
        Weight of the class scatter against the pooled one.
    gamma : float in [0, 1], default 0.5
        Weight of the blend against the scaled identity.""" + _EM_PARAMS
    _model = "rda"

    def __init__(self, alpha=0.5, gamma=0.5, reg_covar=1e-6, max_iter=200, tol=1e-6):
        self.alpha = alpha
        self.gamma = gamma
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.tol = tol


class LDAFAClassifier(_DiscriminantBase):
    """LDA with a factor-analysis covariance :math:`\\Lambda\\Lambda^\\top + \\Psi` (Marlin 6.2.5-6.2.6).

    ``training="generative"``: class means from the observed entries (6.2.22), then a missing-data FA EM
    on the class-centred features with the mean fixed at 0 (6.2.23). ``training="discriminative"``:
    maximise the conditional log-likelihood (6.2.24) minus ``reg / 2 * sum_c mu_c^T Sigma^-1 mu_c`` (the
    digest's reading of the thesis's ambiguous penalty, see :mod:`explorer.core.classifiers.lda_fa`) by L-BFGS-B,
    at most ``max_iter`` iterations, from the generative fit. The features are centred by their observed
    column means before fitting (the penalty pulls the means towards the origin); ``means_`` are
    reported in the original units.

    Parameters
    ----------
    n_factors : int >= 0, default 1
        Number of factors Q (< n_features); 0 gives a diagonal covariance.
    training : {"generative", "discriminative"}, default "generative"
    reg : float >= 0, default 1e-3
        :math:`\\lambda` of the discriminative penalty (unused by generative training).
    max_iter : int, default 1000
        L-BFGS-B iterations (discriminative training).
    random_state : None, int or numpy.random.Generator
        Accepted for API uniformity; the fit is deterministic (the FA EM starts from a PPCA closed form).

    Attributes
    ----------
    classes_, priors_, means_ : as :class:`LDAClassifier`
    loadings_ : ndarray (n_features, n_factors)
    psi_ : ndarray (n_features,)
    covariance_ : ndarray (n_features, n_features)
        :math:`\\Lambda\\Lambda^\\top + \\Psi`.
    center_ : ndarray (n_features,)
        The observed column means subtracted before fitting.
    conditional_log_likelihood_ : float
        :math:`\\sum_n \\log P(y_n \\mid x_n^o)` of the fit on the training data (no penalty).
    generative_conditional_log_likelihood_ : float
        The same for the generative fit (the discriminative start).
    n_iter_ : int
        FA EM iterations (generative) or L-BFGS-B iterations (discriminative).
    converged_ : bool
    """

    def __init__(self, n_factors=1, training="generative", reg=1e-3, max_iter=1000, random_state=None):
        self.n_factors = n_factors
        self.training = training
        self.reg = reg
        self.max_iter = max_iter
        self.random_state = random_state

    def fit(self, X, y):
        """Fit LDA-FA (see the class docstring); ``X`` may contain NaN, ``y`` must be complete.

        Returns
        -------
        self
        """
        if self.training not in TRAINING:
            raise BadInputError(f"training must be one of {TRAINING}, got {self.training!r}.")
        config = _lf.LDAFAConfig(n_factors=self.n_factors, reg=self.reg, max_iter=self.max_iter)
        rng = check_random_state(self.random_state)
        Xn, missing = self._fit_features(X)
        q = self.n_factors
        if isinstance(q, numbers.Integral) and q >= Xn.shape[1]:
            raise BadInputError(f"n_factors={q} must be smaller than n_features={Xn.shape[1]}; use fewer factors.")
        codes, classes = _labels(y, Xn.shape[0])
        center = np.nanmean(Xn, axis=0)
        data = _dm.prepare(Xn - center, codes, missing, n_classes=classes.size)
        self.classes_ = classes
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gen, fa_res = _lf.fit_generative(data, config, rng)
            if self.training == "discriminative":
                res = _lf.fit_discriminative(data, config, gen, rng)
                params, n_iter, converged, message = res.params, res.n_iter, res.converged, res.message
            else:
                params, n_iter, converged, message = gen, fa_res.n_iter, fa_res.converged, fa_res.message
        if not converged:
            warnings.warn(f"LDAFAClassifier ({self.training}): {message}", ConvergenceWarning, stacklevel=2)
        self.center_ = center
        self.priors_ = np.array(params.priors)
        self.means_ = np.array(params.means) + center
        self.loadings_ = np.array(params.loadings)
        self.psi_ = np.array(params.psi)
        self.covariance_ = params.covariance
        self.conditional_log_likelihood_ = float(_lf.conditional_log_likelihood(data, params))
        self.generative_conditional_log_likelihood_ = float(_lf.conditional_log_likelihood(data, gen))
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        return self

    def _fit_covariances(self):
        return self.covariance_
