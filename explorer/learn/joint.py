"""Classifiers and a regressor from a joint mixture density fitted by EM on incomplete data.

Ghahramani & Jordan (1994) sections 4.3-4.4 (the ghahramani1994 reference digest, sections 2.7, 2.9, 2.10):
the density of the features *and* the label (or target) is estimated by EM, where EM fills in
both the missing features and the missing labels, and prediction conditions the fitted density
on the observed inputs, which marginalises missing test inputs exactly.

* :class:`GaussianMixtureClassifier`: Gaussian components x a class variable
  (:mod:`explorer.core.classifiers.joint_mixture`). ``structure="per_class"`` gives each class its own
  ``n_components`` Gaussians (``n_components=1``: QDA with maximum-likelihood covariances, trained
  on incomplete data); ``structure="joint"`` is G&J's mixture whose components each carry a learned
  class distribution P(c | j). ``y`` may contain ``-1`` / NaN (unlabelled rows): semi-supervised EM.
* :class:`GaussianMixtureRegressor`: a Gaussian mixture on ``[X, y]`` (:mod:`explorer.core.mixtures.em_gmm`);
  ``predict`` is the least-squares estimate E[y | x^o] (eq. 13) or a draw from p(y | x^o), with
  ``predict_interval`` (quantiles of the conditional mixture), ``sample`` and ``conditional_density``.
  Rows whose ``y`` is NaN still inform the input density.
* :class:`BernoulliMixtureClassifier`: binary features (0/1, NaN = missing) with a class variable
  (:mod:`explorer.core.discrete.bernoulli_mixture`).

Step / Play: ``GaussianMixtureClassifier.start(X, y)`` validates and initialises (iteration 0),
``step()`` runs one EM iteration; ``state_``, ``core_data_`` and ``core_config_`` are the core
objects (``explorer.core.classifiers.joint_mixture.step(state_, core_data_, core_config_)``).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import check_is_fitted

from explorer.core.classifiers import joint_mixture as jm
from explorer.core.discrete import bernoulli_mixture as bm
from explorer.core.gaussians.conditional import regression
from explorer.core.gaussians.mixture_regression import conditional_density as _conditional_density
from explorer.core.mixtures import em_gmm
from explorer.core.validation import BadInputError, check_level
from explorer.learn._base import SupervisedMixin, check_features, check_finite_output, check_labels
from explorer.utils.random_state import check_random_state

__all__ = ["GaussianMixtureClassifier", "GaussianMixtureRegressor", "BernoulliMixtureClassifier"]


def _labels(y, n_samples: int):
    """``(codes, classes)`` with -1 / NaN / None = unlabelled (see :func:`explorer.learn._base.check_labels`)."""
    return check_labels(y, n_samples, allow_unlabelled=True)


class _MixtureClassifierBase(SupervisedMixin, ClassifierMixin, BaseEstimator):
    def predict_proba(self, X):
        """:math:`P(c \\mid x^o)`, shape (n_samples, n_classes); rows sum to one."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        """The most probable class of every row (missing features marginalised)."""
        best = np.argmax(self.predict_log_proba(X), axis=1)
        return self.classes_[best]


# ============================================================================ Gaussian classifier
class GaussianMixtureClassifier(_MixtureClassifierBase):
    """Gaussian mixture classifier trained by EM on incomplete features and labels.

    Parameters
    ----------
    n_components : int, default 1
        Gaussians per class (``"per_class"``) or in total (``"joint"``).
    structure : {"per_class", "joint"}, default "per_class"
        ``"per_class"``: every component belongs to one class (mixture discriminant analysis; with
        ``n_components=1`` and complete data, QDA with ML covariances). ``"joint"``: every component
        has a learned class distribution P(c | j) (Ghahramani & Jordan section 4.4).
    covariance_type : {"full", "diag"}, default "full"
    reg_covar : float, default 1e-6
        Added to every covariance's diagonal after each M-step.
    prior : None, "auto", "fraley-raftery" or NIWPrior, default None
        Normal-inverse-Wishart prior on the components (MAP-EM), as in
        :class:`explorer.impute.gaussian_mixture.GaussianMixtureImputer`.
    label_prior : float, default 0.01
        Dirichlet pseudo-count on P(c | j) for ``"joint"`` (keeps log-probabilities finite).
    max_iter : int, default 200
    tol : float, default 1e-6
        Per-row change of the objective that stops EM.
    n_init : int, default 1
    init : {"kmeans", "random"}, default "kmeans"
    random_state : None, int or numpy.random.Generator

    Attributes
    ----------
    classes_ : ndarray
    weights_, means_, covariances_ : ndarray
        Mixing weights (M,), means (M, D), covariances (M, D, D) or (M, D).
    class_probs_ : ndarray (M, n_classes)
        P(c | j) (one-hot for ``"per_class"``).
    n_iter_, converged_, log_likelihood_, objective_
    fit_path_ : tuple of dict
        Snapshots of every EM iteration of the kept restart (see
        :func:`explorer.core.classifiers.joint_mixture.snapshot`).
    state_, core_data_, core_config_
        The core objects, for stepping EM from outside (:meth:`start`, :meth:`step`).
    """

    def __init__(self, n_components=1, structure="per_class", covariance_type="full", reg_covar=1e-6, prior=None,
                 label_prior=0.01, max_iter=200, tol=1e-6, n_init=1, init="kmeans", random_state=None):
        self.n_components = n_components
        self.structure = structure
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.prior = prior
        self.label_prior = label_prior
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.init = init
        self.random_state = random_state

    def _config(self, n_classes: int) -> jm.JointConfig:
        return jm.JointConfig(
            n_classes=n_classes, n_components=self.n_components, structure=self.structure,
            covariance_type=self.covariance_type, reg_covar=self.reg_covar, prior=self.prior,
            label_prior=self.label_prior, tol=self.tol, max_iter=self.max_iter, n_init=self.n_init, init=self.init)

    def _prepare(self, X, y):
        Xn, missing = self._fit_features(X)
        codes, classes = _labels(y, Xn.shape[0])
        config = self._config(len(classes))
        data = jm.prepare(Xn, codes, len(classes))
        self.classes_ = classes
        self.core_config_ = config
        self.core_data_ = data
        return data, config

    def fit(self, X, y):
        """Fit by EM. ``X`` may contain NaN (missing features); ``y`` may contain -1 / NaN (unlabelled rows)."""
        data, config = self._prepare(X, y)
        result = jm.fit(data, config, check_random_state(self.random_state))
        self._set_state(result.state)
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.fit_path_ = result.trace
        return self

    def start(self, X, y):
        """Validate and initialise without iterating (iteration 0); then call :meth:`step`. Returns self."""
        data, config = self._prepare(X, y)
        self._set_state(jm.init(data, config, check_random_state(self.random_state)))
        self.n_iter_ = 0
        self.converged_ = False
        self.fit_path_ = (jm.snapshot(self.state_, data, config),)
        return self

    def step(self, n_steps: int = 1):
        """Run ``n_steps`` EM iterations from the current state (after :meth:`start` or :meth:`fit`). Returns self."""
        check_is_fitted(self, "state_")
        if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
            raise BadInputError(f"n_steps must be a positive integer, got {n_steps!r}.")
        state, path = self.state_, list(self.fit_path_)
        for _ in range(int(n_steps)):
            new = jm.step(state, self.core_data_, self.core_config_)
            change = (new.objective - state.objective) / max(self.core_data_.n_fit, 1)
            state = new
            path.append(jm.snapshot(state, self.core_data_, self.core_config_))
            if abs(change) < self.core_config_.tol:
                self.converged_ = True
        self._set_state(state)
        self.n_iter_ = state.iteration
        self.fit_path_ = tuple(path)
        return self

    def _set_state(self, state: jm.JointState) -> None:
        self.state_ = state
        self.weights_ = np.array(state.weights)
        self.means_ = np.array(state.means)
        self.covariances_ = np.array(state.covariances)
        self.class_probs_ = np.array(state.label_probs)
        self.log_likelihood_ = state.log_likelihood
        self.objective_ = state.objective

    def predict_log_proba(self, X):
        """:math:`\\log P(c \\mid x^o)` by exact marginalisation of the missing features, (n_samples, n_classes)."""
        Xn, missing = self._predict_features(X)
        out = jm.predict_log_proba(self.state_, Xn, self.core_config_, missing=missing)
        return check_finite_output(out, "predict_log_proba")


# ============================================================================ Gaussian regressor
class GaussianMixtureRegressor(SupervisedMixin, RegressorMixin, BaseEstimator):
    """Regression from a Gaussian mixture fitted by EM on the joint of inputs and targets.

    Parameters
    ----------
    n_components : int, default 1
    targets : None, int or sequence of int, default None
        None: the targets are ``y``'s columns (``fit(X, y)``). Given: ``fit(X)`` without ``y`` and
        these columns of ``X`` are the targets, the others the inputs (``predict`` then takes the
        same full-width ``X`` and ignores its target columns).
    estimate : {"mean", "sample"}, default "mean"
        ``predict`` returns the least-squares estimate E[y | x^o] (eq. 13) or one draw from p(y | x^o).
    covariance_type, reg_covar, prior, max_iter, tol, n_init, random_state
        As :class:`GaussianMixtureClassifier` (EM of :mod:`explorer.core.mixtures.em_gmm`).

    Attributes
    ----------
    weights_, means_, covariances_ : the joint mixture over [inputs, targets] (columns in that order
        when ``y`` is given; ``X``'s order when ``targets`` is given).
    inputs_, targets_ : ndarray of int
        Column indices of the inputs and targets in the joint model.
    n_iter_, converged_, log_likelihood_, fit_path_
    """

    def __init__(self, n_components=1, targets=None, estimate="mean", covariance_type="full", reg_covar=1e-6,
                 prior=None, max_iter=200, tol=1e-6, n_init=1, random_state=None):
        self.n_components = n_components
        self.targets = targets
        self.estimate = estimate
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.prior = prior
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, y=None):
        """Fit the joint mixture on ``[X, y]`` (NaN anywhere = missing), or on ``X`` with ``targets`` given."""
        if self.estimate not in ("mean", "sample"):
            raise BadInputError(f"estimate must be 'mean' or 'sample', got {self.estimate!r}.")
        Xn, _ = self._fit_features(X)
        n, p = Xn.shape
        if y is not None:
            if self.targets is not None:
                raise BadInputError("Give either y or targets (columns of X), not both.")
            arr = np.asarray(y) if not hasattr(y, "to_numpy") else y.to_numpy()
            if arr.ndim == 2 and arr.shape[1] == 1:
                warnings.warn("A column-vector y was passed when a 1d array was expected; it is ravelled.",
                              DataConversionWarning, stacklevel=2)
                arr = arr[:, 0]
            self._y_1d = arr.ndim == 1
            Y, _, _ = check_features(arr.reshape(n, -1) if arr.ndim == 1 else arr, name="y")
            if Y.shape[0] != n:
                raise BadInputError(f"y has {Y.shape[0]} rows but X has {n}.")
            joint = np.hstack([Xn, Y])
            self.inputs_ = np.arange(p)
            self.targets_ = np.arange(p, p + Y.shape[1])
        else:
            if self.targets is None:
                raise BadInputError("GaussianMixtureRegressor requires y to be passed, but the target y is None "
                                    "(or give targets: the columns of X to predict).")
            tg = np.atleast_1d(np.asarray(self.targets))
            if tg.dtype.kind not in "iu" or tg.ndim != 1 or tg.size == 0 or np.any(tg < 0) or np.any(tg >= p) \
                    or np.unique(tg).size != tg.size:
                raise BadInputError(
                    f"targets must be distinct column indices of X (0 .. {p - 1}), got {self.targets!r}.")
            if tg.size == p:
                raise BadInputError("targets cannot be every column of X; at least one input is needed.")
            self._y_1d = np.ndim(self.targets) == 0
            joint = Xn
            self.targets_ = tg.astype(np.intp)
            self.inputs_ = np.setdiff1d(np.arange(p), tg)
        data = em_gmm.prepare(joint)
        config = em_gmm.EMConfig(n_components=self.n_components, covariance_type=self.covariance_type,
                                 reg_covar=self.reg_covar, tol=self.tol, max_iter=self.max_iter, n_init=self.n_init,
                                 prior=self.prior)
        result = em_gmm.fit(data, config, check_random_state(self.random_state))
        st = result.state
        self.weights_ = np.array(st.weights)
        self.means_ = np.array(st.means)
        self.covariances_ = np.array(st.covariances)
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.log_likelihood_ = st.log_likelihood
        self.fit_path_ = result.trace
        return self

    def _conditional(self, X):
        Xn, _ = self._predict_features(X)
        # C order: conditional.regression gives wrong means for Fortran-ordered inputs (reported to the lead)
        Xi = np.ascontiguousarray(Xn if self.targets is None else Xn[:, self.inputs_])
        return regression(self.weights_, self.means_, self.covariances_, Xi, inputs=self.inputs_,
                          targets=self.targets_, covariance_type=self.covariance_type)

    def _shape(self, a: np.ndarray) -> np.ndarray:
        return a[..., 0] if self._y_1d else a

    def predict(self, X):
        """E[y | x^o] (``estimate="mean"``) or one draw from p(y | x^o) (``"sample"``, seeded by ``random_state``)."""
        cond = self._conditional(X)
        if self.estimate == "sample":
            out = cond.sample(1, check_random_state(self.random_state))[0]
        else:
            out = cond.mean()
        return self._shape(check_finite_output(out, "predict"))

    def predict_interval(self, X, level=0.95):
        """Equal-tailed band of every target: ``(lower, upper)``, quantiles (1 -+ level) / 2 of the
        conditional mixture (vectorised bisection on its CDF)."""
        level = check_level(level)
        lower, upper = self._conditional(X).interval(level)
        return self._shape(check_finite_output(lower, "lower")), self._shape(check_finite_output(upper, "upper"))

    def sample(self, X, n_draws=1, random_state=None):
        """Draws from p(y | x^o): shape (n_draws, n_samples) for one target, (n_draws, n_samples, n_targets) else."""
        out = self._conditional(X).sample(n_draws, check_random_state(random_state))
        return self._shape(out)

    def conditional_density(self, X_row, grid):
        """Density of every target given one row of inputs on ``grid``: (G,) for one target, (n_targets, G) else."""
        row = np.asarray(X_row, dtype=float) if not hasattr(X_row, "to_numpy") else X_row.to_numpy(dtype=float)
        if row.ndim == 1:
            row = row[None]
        if row.ndim != 2 or row.shape[0] != 1:
            raise BadInputError(f"X_row must be one row (1-D, or 2-D with one row); got shape {row.shape}.")
        dens, _ = _conditional_density(self._conditional(row), 0, grid)
        dens = check_finite_output(dens, "conditional_density")
        return dens[0] if self._y_1d else dens


# ============================================================================ Bernoulli classifier
class BernoulliMixtureClassifier(_MixtureClassifierBase):
    """Bernoulli mixture classifier for binary features (0/1, NaN = missing) trained by EM.

    Parameters
    ----------
    n_components : int, default 1
        Components per class (``"per_class"``) or in total (``"joint"``).
    structure : {"per_class", "joint"}, default "per_class"
    pseudo_count : float, default 1.0
        Beta(1 + a, 1 + a) prior on every P(x_d = 1 | j) (keeps them off 0 and 1).
    label_prior : float, default 0.01
        Dirichlet pseudo-count on P(c | j) (``"joint"``).
    max_iter, tol, n_init, random_state
    """

    def __init__(self, n_components=1, structure="per_class", pseudo_count=1.0, label_prior=0.01, max_iter=200,
                 tol=1e-6, n_init=1, random_state=None):
        self.n_components = n_components
        self.structure = structure
        self.pseudo_count = pseudo_count
        self.label_prior = label_prior
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, y):
        """Fit by EM; ``y`` may contain -1 / NaN (unlabelled rows)."""
        if self.structure not in ("per_class", "joint"):
            raise BadInputError(f"structure must be 'per_class' or 'joint', got {self.structure!r}.")
        Xn, missing = self._fit_features(X)
        codes, classes = _labels(y, Xn.shape[0])
        config = bm.BernoulliConfig(n_components=self.n_components, n_classes=len(classes), structure=self.structure,
                                    pseudo_count=self.pseudo_count, label_prior=self.label_prior, tol=self.tol,
                                    max_iter=self.max_iter, n_init=self.n_init)
        data = bm.prepare(Xn, codes, len(classes), missing=missing)
        result = bm.fit(data, config, check_random_state(self.random_state))
        self.classes_ = classes
        self.state_ = result.state
        self.weights_ = np.array(result.state.weights)
        self.probs_ = np.array(result.state.probs)
        self.class_probs_ = np.array(result.state.label_probs)
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.log_likelihood_ = result.state.log_likelihood
        self.fit_path_ = result.trace
        return self

    def predict_log_proba(self, X):
        """:math:`\\log P(c \\mid x^o)`; missing entries drop out of the likelihood."""
        Xn, missing = self._predict_features(X)
        return check_finite_output(bm.predict_log_proba(self.state_, Xn, missing=missing), "predict_log_proba")
