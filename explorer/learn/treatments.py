"""Input treatments: give any scikit-learn estimator NaN-tolerant inputs (marlin2008 sections 5.1, 5.4, 5.7).

Marlin's chapter 6 compares, for logistic regression, kernel logistic regression and neural
networks, five ways of feeding incomplete inputs to a discriminative classifier (digest section
5.1). :class:`MissingInputClassifier` and :class:`MissingInputRegressor` implement them around any
scikit-learn estimator:

``"zero"``
    Zero imputation, the input is :math:`x \\odot r` (r = 1 observed, the thesis's response
    indicator; this library's ``missing`` mask is ``~r``).
``"mean"``
    Unconditional mean imputation: a missing :math:`x_d` is replaced by the mean of the observed
    values of feature d in the training set.
``"augmented"``
    Response-indicator augmentation, the input is :math:`\\tilde x = [x \\odot r, r]` (section 5.1
    item 5). Wrapped around a linear model this is *exactly* the response-augmented logistic
    regression of eq. 6.3.11: the linear function of :math:`\\tilde x` is
    :math:`b + \\sum_d w_d r_d x_d + \\sum_d v_d r_d = b + \\sum_d r_d (w_d x_d + v_d)`, and
    scikit-learn's ``LogisticRegression(C)`` minimises
    :math:`C \\sum_n \\ell_n + \\tfrac12 (w^\\top w + v^\\top v)`, i.e. eq. 6.3.12 divided by C with
    :math:`\\lambda = 1/(2C)` (same minimiser; tested numerically against a direct minimisation
    of 6.3.12). Wrapped around ``MLPClassifier`` the first-layer activation is
    :math:`A^1_k = \\sum_d W_{dk} r_d x_d + \\sum_d V_{dk} r_d + b_k = \\sum_d r_d (W_{dk} x_d + V_{dk}) + b_k`,
    the response-augmented network of eq. 6.6.12 (corrected form, Appendix A); weight decay then
    acts on W and V alike, as in the thesis.
``"reduced"``
    Reduced models ("network reduction", section 5.1 item 4): one clone of the estimator per
    missingness pattern seen in training. The model of pattern r is trained on *every* training
    case whose observed set contains the observed set of r, using only the dimensions observed
    in r. A test row uses the model of its exact pattern. **Unseen pattern:** a test pattern that
    no training row has is handled by the definition itself: a model is trained on the fly from
    the training cases that observe all of its dimensions (it is not stored; every ``predict``
    call on such a pattern refits it, deterministically when the estimator's ``random_state``
    is fixed). Only when no training case covers the pattern is it an error. A pattern with no
    observed dimension (an all-missing row) predicts the class frequencies (regressor: the mean)
    of the whole training set; a pattern whose covering cases hold a single class predicts
    Laplace-smoothed class frequencies :math:`(n_c + 1) / (n + C)` of those cases.
``"single"``
    Impute with ``imputer`` (default :class:`explorer.impute.gaussian_mixture.GaussianMixtureImputer`, its
    conditional mean; any scikit-learn imputer works, e.g. ``IterativeImputer``) and fit the
    estimator on the completed data; test rows are completed by the same fitted imputer.
``"multiple"``
    Multiple imputation as used in the thesis (digest section 5.4, MI procedure): S imputation
    models, one completion of the training set from each (each missing value drawn from
    :math:`P^s(x^m \\mid x^o)`), one estimator per completed set, and at test time one completion
    per model with the predictions averaged, :math:`P(y \\mid x^o_*) = \\frac1S \\sum_s P^s(y \\mid x_{*s})`
    (eq. 6.3.10); a regressor averages its S predictions.

    ``imputation_models="separate"`` (default, the thesis's choice): S = ``n_imputations``
    separate fits of ``imputer``, each with its own seed, so that different EM optima (modes of
    the mixture fit) are represented; ``"one"``: one fitted imputer and S draws from its
    ``sample`` method (cheaper; only the conditional spread of one fit). Neither is "proper" MI
    in Rubin's sense (no draw of the imputation model's parameters from their posterior); the
    separate fits only approximate that spread by the variation between EM restarts. An imputer
    without a ``sample`` method (e.g. ``IterativeImputer(sample_posterior=True)``) is used through
    ``fit``/``transform`` with a different ``random_state`` per model (separate models only).

    :meth:`pooled_coefficients` pools the coefficients of linear estimators by Rubin's rules
    (see :func:`rubin_pool`).

Unlike the thesis, which imputes *before* the cross-validation split ("a form of transductive
learning", digest 5.4), these wrappers impute inside ``fit``, so that ``GridSearchCV`` over the
wrapper refits the imputers on every training fold. The thesis's shortcut is obtained by
wrapping a ``GridSearchCV`` *inside* the treatment instead (``MissingInputClassifier(GridSearchCV(...),
"multiple")``): the completed training sets are then cross-validated, one search per model.

:class:`BestOfRestarts` keeps the best of several random restarts by training loss (thesis section
5.7: "random restarts; keep the net with the lowest training loss").
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, RegressorMixin, clone, is_classifier
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from explorer.core.rubin import PooledEstimate, rubin_pool
from explorer.core.validation import BadInputError
from explorer.learn._base import SupervisedMixin, check_finite_output, check_labels
from explorer.utils.random_state import check_random_state

__all__ = [
    "TREATMENTS",
    "MissingInputClassifier",
    "MissingInputRegressor",
    "BestOfRestarts",
    "PooledEstimate",
    "rubin_pool",
    "coefficient_covariance",
]

#: The input treatments, in the thesis's order.
TREATMENTS = ("zero", "mean", "augmented", "reduced", "single", "multiple")
_IMPUTATION_MODELS = ("separate", "one")


def _inverse_spd(A: np.ndarray) -> np.ndarray:
    """:math:`A^{-1}` of a symmetric positive definite matrix by its Cholesky factor (no ``inv``)."""
    factor = cho_factor(A, lower=True)
    return cho_solve(factor, np.eye(A.shape[0]))


def coefficient_covariance(estimator, X, y) -> tuple[np.ndarray, np.ndarray]:
    """``(theta, cov)``: the coefficients of a fitted linear model and their estimated covariance.

    ``theta = [intercept, coef...]`` (no intercept entry when ``fit_intercept=False``).

    * ``LinearRegression`` / ``Ridge`` (single target): with the design :math:`\\tilde X = [1, X]`,
      penalty :math:`P = \\mathrm{diag}(0, \\alpha, ..., \\alpha)` (0 for ``LinearRegression``,
      intercept unpenalised as in scikit-learn) and :math:`A = \\tilde X^\\top \\tilde X + P`, the
      homoscedastic covariance :math:`\\hat\\sigma^2 A^{-1}\\tilde X^\\top\\tilde X A^{-1}` with
      :math:`\\hat\\sigma^2 = RSS/(n - p)` (p = number of columns of :math:`\\tilde X`); for
      :math:`\\alpha = 0` the classical OLS covariance :math:`\\hat\\sigma^2(\\tilde X^\\top\\tilde X)^{-1}`.
    * binary ``LogisticRegression`` with an L2 penalty (``l1_ratio == 0``): the inverse Hessian of
      the penalised negative log-likelihood at the optimum,
      :math:`(\\tilde X^\\top W \\tilde X + P/C)^{-1}`, :math:`W = \\mathrm{diag}(p_n(1-p_n))`,
      P = diag(0, 1, ..., 1) (the intercept unpenalised, as scikit-learn's lbfgs/newton solvers do).

    Other estimators raise :class:`BadInputError`.
    """
    from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge

    est = getattr(estimator, "best_estimator_", estimator)
    X = np.asarray(X, dtype=float)
    n = X.shape[0]
    fit_intercept = bool(getattr(est, "fit_intercept", False))
    design = np.hstack([np.ones((n, 1)), X]) if fit_intercept else X
    p = design.shape[1]
    pen = np.ones(p)
    if fit_intercept:
        pen[0] = 0.0
    if isinstance(est, (LinearRegression, Ridge)):
        coef = np.asarray(est.coef_, dtype=float)
        if coef.ndim != 1:
            raise BadInputError("pooled coefficients support a single target (coef_ of shape (n_features,)).")
        theta = np.concatenate([[float(est.intercept_)], coef]) if fit_intercept else coef
        alpha = float(getattr(est, "alpha", 0.0)) if isinstance(est, Ridge) else 0.0
        if n <= p:
            raise BadInputError(f"need more rows ({n}) than coefficients ({p}) for a residual variance.")
        resid = np.asarray(y, dtype=float) - design @ theta
        sigma2 = float(resid @ resid) / (n - p)
        gram = design.T @ design
        A_inv = _inverse_spd(gram + alpha * np.diag(pen) + 1e-12 * np.trace(gram) / p * np.eye(p))
        cov = sigma2 * A_inv @ gram @ A_inv
        return theta, (cov + cov.T) / 2
    if isinstance(est, LogisticRegression):
        coef = np.asarray(est.coef_, dtype=float)
        if coef.shape[0] != 1:
            raise BadInputError("pooled coefficients of LogisticRegression support binary problems only.")
        if float(getattr(est, "l1_ratio", 0.0) or 0.0) != 0.0:
            raise BadInputError("pooled coefficients of LogisticRegression need an L2 penalty (l1_ratio=0).")
        theta = np.concatenate([np.ravel(est.intercept_), coef[0]]) if fit_intercept else coef[0]
        prob = 1.0 / (1.0 + np.exp(-(design @ theta)))
        weight = prob * (1.0 - prob)
        C = float(est.C)
        hess = design.T @ (weight[:, None] * design) + (np.diag(pen) / C if np.isfinite(C) else 0.0)
        cov = _inverse_spd(hess)
        return theta, (cov + cov.T) / 2
    raise BadInputError(
        f"no coefficient covariance for {type(est).__name__}; supported: LinearRegression, Ridge and binary "
        "L2 LogisticRegression.")


# ------------------------------------------------------------------------------------------------
# helpers


class _ConstantModel:
    """Predicts fixed class probabilities (classifier) or a fixed value (regressor)."""

    def __init__(self, value: np.ndarray, classes: np.ndarray | None):
        self.value = np.asarray(value, dtype=float)
        self.classes_ = classes

    def predict_proba(self, X):
        return np.tile(self.value, (len(X), 1))

    def predict(self, X):
        if self.classes_ is not None:
            return np.full(len(X), self.classes_[int(np.argmax(self.value))])
        return np.full(len(X), float(self.value))


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31 - 1))


def _with_seed(imputer, seed: int):
    imp = clone(imputer)
    if "random_state" in imp.get_params(deep=False):
        imp.set_params(random_state=seed)
    return imp


# ------------------------------------------------------------------------------------------------
# the meta-estimators


class _MissingInputBase(MetaEstimatorMixin, BaseEstimator):
    _is_classifier = True

    def __init__(self, estimator, treatment="mean", imputer=None, n_imputations=5, imputation_models="separate",
                 random_state=None):
        self.estimator = estimator
        self.treatment = treatment
        self.imputer = imputer
        self.n_imputations = n_imputations
        self.imputation_models = imputation_models
        self.random_state = random_state

    # ---------------------------------------------------------------- parameters
    def _check_params(self):
        if self.estimator is None or not hasattr(self.estimator, "fit"):
            raise BadInputError(f"estimator must be a scikit-learn estimator (with fit), got {self.estimator!r}.")
        if self.treatment not in TREATMENTS:
            raise BadInputError(f"treatment must be one of {TREATMENTS}, got {self.treatment!r}.")
        if self.imputation_models not in _IMPUTATION_MODELS:
            raise BadInputError(
                f"imputation_models must be one of {_IMPUTATION_MODELS}, got {self.imputation_models!r}.")
        if self.treatment == "multiple":
            S = self.n_imputations
            if isinstance(S, bool) or not isinstance(S, numbers.Integral) or S < 1:
                raise BadInputError(f"n_imputations must be a positive integer, got {S!r}.")
        if self.imputer is not None and not hasattr(self.imputer, "fit"):
            raise BadInputError(f"imputer must be a scikit-learn imputer (with fit/transform), got {self.imputer!r}.")
        if self.treatment == "multiple" and self.imputation_models == "one" and self.imputer is not None \
                and not hasattr(self.imputer, "sample"):
            raise BadInputError(
                f"imputation_models='one' draws S completions from one model by its sample method; "
                f"{type(self.imputer).__name__} has none (use imputation_models='separate').")

    def _default_imputer(self):
        if self.imputer is not None:
            return self.imputer
        from explorer.impute.gaussian_mixture import GaussianMixtureImputer

        return GaussianMixtureImputer(empty_rows="marginal")

    # ---------------------------------------------------------------- fixed-input treatments
    def _treat(self, Xn: np.ndarray, missing: np.ndarray) -> np.ndarray:
        if self.treatment == "zero":
            return np.where(missing, 0.0, Xn)
        if self.treatment == "mean":
            return np.where(missing, self.statistics_[None, :], Xn)
        if self.treatment == "augmented":
            return np.hstack([np.where(missing, 0.0, Xn), (~missing).astype(float)])
        if self.treatment == "single":
            return np.asarray(self.imputer_.transform(Xn), dtype=float)
        raise AssertionError(self.treatment)

    # ---------------------------------------------------------------- fit
    def _fit(self, Xn, missing, target):
        self._check_params()
        rng = check_random_state(self.random_state)
        t = self.treatment
        if t == "mean":
            self.statistics_ = np.nanmean(Xn, axis=0)
        if t == "single":
            self.imputer_ = clone(self._default_imputer()).fit(Xn)
        if t in ("zero", "mean", "augmented", "single"):
            self.estimator_ = clone(self.estimator).fit(self._treat(Xn, missing), target)
        elif t == "reduced":
            self._train_X, self._train_observed, self._train_target = Xn.copy(), ~missing, np.array(target)
            self.reduced_models_ = {}
            for pattern in np.unique(~missing, axis=0):
                self.reduced_models_[tuple(bool(v) for v in pattern)] = self._fit_reduced(pattern)
        else:  # multiple
            self._fit_multiple(Xn, target, rng)
        return self

    def _covering(self, pattern: np.ndarray) -> np.ndarray:
        return np.all(self._train_observed[:, pattern], axis=1)

    def _fit_reduced(self, pattern: np.ndarray):
        pattern = np.asarray(pattern, dtype=bool)
        rows = self._covering(pattern)
        target = self._train_target[rows]
        if not rows.any():
            raise BadInputError(
                f"reduced models: no training row observes all of features {np.flatnonzero(pattern).tolist()}, "
                "so no model can be trained for this missingness pattern.")
        if not pattern.any():
            return self._constant(self._train_target)
        if self._is_classifier and np.unique(target).size < 2:
            return self._constant(target)
        return clone(self.estimator).fit(self._train_X[np.ix_(rows, pattern)], target)

    def _fit_multiple(self, Xn, target, rng):
        S = int(self.n_imputations)
        base = self._default_imputer()
        self.imputers_, self.completions_, self.estimators_ = [], [], []
        self._predict_seeds = [_seed(rng) for _ in range(S)]
        if self.imputation_models == "one":
            imp = _with_seed(base, _seed(rng)).fit(Xn)
            draws = np.asarray(imp.sample(Xn, n_imputations=S, random_state=_seed(rng)), dtype=float)
            self.imputers_ = [imp]
            completions = list(draws)
        else:
            completions = []
            for _ in range(S):
                imp = _with_seed(base, _seed(rng)).fit(Xn)
                self.imputers_.append(imp)
                completions.append(self._draw(imp, Xn, _seed(rng)))
        for Z in completions:
            self.completions_.append(Z)
            self.estimators_.append(clone(self.estimator).fit(Z, target))

    @staticmethod
    def _draw(imp, Xn, seed):
        if hasattr(imp, "sample"):
            return np.asarray(imp.sample(Xn, n_imputations=1, random_state=seed), dtype=float)[0]
        return np.asarray(imp.transform(Xn), dtype=float)

    def _test_completions(self, Xn):
        S = len(self.estimators_)
        if self.imputation_models == "one":
            draws = self.imputers_[0].sample(Xn, n_imputations=S, random_state=self._predict_seeds[0])
            return list(np.asarray(draws, dtype=float))
        return [self._draw(imp, Xn, seed) for imp, seed in zip(self.imputers_, self._predict_seeds)]

    # ---------------------------------------------------------------- pooled coefficients
    def pooled_coefficients(self, df_complete: float | str | None = "auto") -> PooledEstimate:
        """Rubin's rules over the S linear models of ``treatment="multiple"``.

        Each completed training set s gives :math:`\\hat Q_s = [b, w]` and its covariance
        :math:`U_s` by :func:`coefficient_covariance` (OLS / ridge sandwich, or the inverse Hessian of
        the penalised logistic regression); :func:`rubin_pool` combines them.

        Parameters
        ----------
        df_complete : "auto", float or None
            Complete-data degrees of freedom for the Barnard-Rubin correction; "auto" uses
            n_samples - n_coefficients, None Rubin's large-sample degrees of freedom.
        """
        check_is_fitted(self, "n_features_in_")
        if self.treatment != "multiple":
            raise BadInputError(f"pooled_coefficients needs treatment='multiple', not {self.treatment!r}.")
        if len(self.estimators_) < 2:
            raise BadInputError("pooled_coefficients needs n_imputations >= 2 (the between variance).")
        pairs = [coefficient_covariance(est, Z, self._pool_target())
                 for est, Z in zip(self.estimators_, self.completions_)]
        thetas = np.array([p[0] for p in pairs])
        covs = np.array([p[1] for p in pairs])
        if df_complete == "auto":
            df_complete = float(self.completions_[0].shape[0] - thetas.shape[1])
        return rubin_pool(thetas, covs, df_complete=df_complete)


class MissingInputClassifier(SupervisedMixin, ClassifierMixin, _MissingInputBase):
    """Any scikit-learn classifier made NaN-tolerant by one of Marlin's input treatments.

    See the module docstring (:mod:`explorer.learn.treatments`) for the treatments and equations.

    Parameters
    ----------
    estimator : scikit-learn classifier
        Cloned, never modified. Needs ``predict_proba`` for ``predict_proba`` and for the
        averaging of ``treatment="multiple"`` (eq. 6.3.10). It is fitted on integer class codes
        0..C-1; ``classes_`` of the wrapper holds the original labels.
    treatment : {"zero", "mean", "augmented", "reduced", "single", "multiple"}, default "mean"
    imputer : scikit-learn imputer or None
        For "single" and "multiple"; None uses
        ``explorer.impute.gaussian_mixture.GaussianMixtureImputer(empty_rows="marginal")``. Cloned; its
        ``random_state`` is set per imputation model.
    n_imputations : int, default 5
        S, the number of imputation models (``"multiple"``).
    imputation_models : {"separate", "one"}, default "separate"
        S separate imputer fits (thesis) or S draws from one fit (see module docstring).
    random_state : int, Generator or None
        Seeds of the imputation models and of their draws (training and test completions; the
        test draws are fixed at fit time, so ``predict`` is deterministic).

    Attributes
    ----------
    classes_, n_features_in_
    estimator_ : fitted clone ("zero", "mean", "augmented", "single")
    statistics_ : ndarray (n_features,) -- training means ("mean")
    imputer_ : the fitted imputer ("single")
    reduced_models_ : dict {observed-pattern tuple: model} ("reduced"; True = observed)
    imputers_, completions_, estimators_ : lists ("multiple")
    """

    _is_classifier = True

    def fit(self, X, y):
        """Fit the treatment and the estimator(s) on ``X`` (NaN = missing) and labels ``y``."""
        Xn, missing = self._fit_features(X)
        codes, classes = check_labels(y, Xn.shape[0])
        self.classes_ = classes
        return self._fit(Xn, missing, codes)

    def _constant(self, codes):
        C = len(self.classes_)
        counts = np.bincount(codes, minlength=C).astype(float)
        if np.count_nonzero(counts) < 2:
            counts = counts + 1.0  # Laplace smoothing: never a probability of exactly 0 or 1
        return _ConstantModel(counts / counts.sum(), np.arange(C))

    def _pool_target(self):
        return self._fit_codes

    def _fit(self, Xn, missing, target):
        self._fit_codes = np.asarray(target)
        return super()._fit(Xn, missing, target)

    def _proba_of(self, model, Z) -> np.ndarray:
        out = np.zeros((Z.shape[0], len(self.classes_)))
        if not hasattr(model, "predict_proba"):
            raise BadInputError(
                f"{type(model).__name__} has no predict_proba; the wrapper's probabilities need it.")
        out[:, np.asarray(model.classes_, dtype=int)] = model.predict_proba(Z)
        return out

    def _reduced_apply(self, Xn, missing, fn):
        outs = {}
        observed = ~missing
        patterns, inverse = np.unique(observed, axis=0, return_inverse=True)
        inverse = np.ravel(inverse)
        for u, pattern in enumerate(patterns):
            rows = inverse == u
            key = tuple(bool(v) for v in pattern)
            model = self.reduced_models_.get(key)
            if model is None:  # unseen pattern: train on the fly from the covering cases (not stored)
                model = self._fit_reduced(pattern)
            outs[u] = (rows, fn(model, Xn[np.ix_(rows, pattern)]))
        return outs

    @available_if(lambda self: self.treatment != "multiple" or hasattr(self.estimator, "predict_proba"))
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes); rows sum to one (eq. 6.3.10 for MI)."""
        Xn, missing = self._predict_features(X)
        t = self.treatment
        if t == "reduced":
            P = np.zeros((Xn.shape[0], len(self.classes_)))
            for rows, block in self._reduced_apply(Xn, missing, self._proba_of).values():
                P[rows] = block
        elif t == "multiple":
            P = np.mean([self._proba_of(est, Z) for est, Z in zip(self.estimators_, self._test_completions(Xn))],
                        axis=0)
        else:
            P = self._proba_of(self.estimator_, self._treat(Xn, missing))
        P = check_finite_output(P, "predict_proba")
        return P / P.sum(axis=1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """Most probable class (for estimators without ``predict_proba``: their own ``predict``)."""
        if hasattr(self.estimator, "predict_proba"):
            codes = np.argmax(self.predict_proba(X), axis=1)
            return self.classes_[codes]
        Xn, missing = self._predict_features(X)
        t = self.treatment
        if t == "reduced":
            codes = np.zeros(Xn.shape[0], dtype=int)
            for rows, block in self._reduced_apply(Xn, missing, lambda m, Z: m.predict(Z)).values():
                codes[rows] = block
        elif t == "multiple":  # majority vote of the S models
            votes = np.array([est.predict(Z) for est, Z in zip(self.estimators_, self._test_completions(Xn))],
                             dtype=int)
            counts = np.apply_along_axis(np.bincount, 0, votes, minlength=len(self.classes_))
            codes = np.argmax(counts, axis=0)
        else:
            codes = np.asarray(self.estimator_.predict(self._treat(Xn, missing)), dtype=int)
        return self.classes_[codes]


def _check_target(y, n_samples: int) -> np.ndarray:
    if y is None:
        raise BadInputError("This regressor requires y to be passed, but the target y is None (one numeric "
                            "target per row).")
    try:
        arr = np.asarray(y, dtype=float)
    except (TypeError, ValueError):
        raise BadInputError("y must be numeric for a regressor.") from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected; it is read as y.ravel().",
                      DataConversionWarning, stacklevel=3)
        arr = arr[:, 0]
    if arr.ndim != 1 or arr.shape[0] != n_samples:
        raise BadInputError(f"y must be 1-D with one value per row ({n_samples}); got shape {arr.shape}.")
    if not np.isfinite(arr).all():
        raise BadInputError("y has NaN or infinite values; a regressor needs every target.")
    return arr


class MissingInputRegressor(SupervisedMixin, RegressorMixin, _MissingInputBase):
    """Any scikit-learn regressor made NaN-tolerant by one of Marlin's input treatments.

    Same parameters and treatments as :class:`MissingInputClassifier`; "multiple" averages the S
    predictions (Rubin's pooled point prediction) and :meth:`pooled_coefficients` pools a linear
    model's coefficients by Rubin's rules. A reduced model whose pattern observes nothing predicts
    the training mean.
    """

    _is_classifier = False

    def fit(self, X, y):
        """Fit the treatment and the estimator(s) on ``X`` (NaN = missing) and numeric ``y``."""
        Xn, missing = self._fit_features(X)
        target = _check_target(y, Xn.shape[0])
        self._fit_y = target
        return self._fit(Xn, missing, target)

    def _constant(self, target):
        return _ConstantModel(np.mean(target), None)

    def _pool_target(self):
        return self._fit_y

    def predict(self, X) -> np.ndarray:
        """Predicted targets, shape (n_samples,)."""
        Xn, missing = self._predict_features(X)
        t = self.treatment
        if t == "reduced":
            out = np.zeros(Xn.shape[0])
            observed = ~missing
            patterns, inverse = np.unique(observed, axis=0, return_inverse=True)
            inverse = np.ravel(inverse)
            for u, pattern in enumerate(patterns):
                rows = inverse == u
                model = self.reduced_models_.get(tuple(bool(v) for v in pattern))
                if model is None:  # unseen pattern: train on the fly from the covering cases (not stored)
                    model = self._fit_reduced(pattern)
                out[rows] = np.ravel(model.predict(Xn[np.ix_(rows, pattern)]))
        elif t == "multiple":
            out = np.mean([np.ravel(est.predict(Z)) for est, Z in zip(self.estimators_, self._test_completions(Xn))],
                          axis=0)
        else:
            out = np.ravel(self.estimator_.predict(self._treat(Xn, missing)))
        return check_finite_output(np.asarray(out, dtype=float), "predict")


# ------------------------------------------------------------------------------------------------
# restarts


class BestOfRestarts(MetaEstimatorMixin, BaseEstimator):
    """Fit ``n_restarts`` clones with different seeds and keep the one with the lowest training loss.

    Thesis section 5.7 (digest): the networks are trained from random restarts and the net with
    the lowest training loss is kept (5 restarts in chapter 6). The training loss is the
    estimator's own ``loss_`` when it has one (``MLPClassifier``/``MLPRegressor``: the final value
    of the penalised objective it minimised); otherwise the training log loss (classifiers with
    ``predict_proba``) or mean squared error (regressors).

    Parameters
    ----------
    estimator : scikit-learn estimator with a ``random_state`` parameter
    n_restarts : int, default 5
    random_state : int, Generator or None
        Seeds of the restarts.

    Attributes
    ----------
    best_estimator_, losses_ (one per restart), best_index_, classes_ (classifiers)
    """

    def __init__(self, estimator, n_restarts=5, random_state=None):
        self.estimator = estimator
        self.n_restarts = n_restarts
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = self.estimator.__sklearn_tags__()
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.input_tags = inner.input_tags
        return tags

    def _loss(self, est, X, y) -> float:
        if hasattr(est, "loss_") and est.loss_ is not None:
            return float(est.loss_)
        if is_classifier(est) and hasattr(est, "predict_proba"):
            from sklearn.metrics import log_loss

            return float(log_loss(y, est.predict_proba(X), labels=est.classes_))
        return float(np.mean((np.ravel(est.predict(X)) - np.asarray(y, dtype=float)) ** 2))

    def fit(self, X, y, **fit_params):
        """Fit every restart and keep the lowest training loss."""
        n = self.n_restarts
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise BadInputError(f"n_restarts must be a positive integer, got {n!r}.")
        if "random_state" not in self.estimator.get_params(deep=False):
            raise BadInputError(f"{type(self.estimator).__name__} has no random_state; restarts would be identical.")
        rng = check_random_state(self.random_state)
        fits, losses = [], []
        for _ in range(int(n)):
            est = clone(self.estimator).set_params(random_state=_seed(rng)).fit(X, y, **fit_params)
            fits.append(est)
            losses.append(self._loss(est, X, y))
        self.losses_ = np.array(losses)
        self.best_index_ = int(np.argmin(self.losses_))
        self.best_estimator_ = fits[self.best_index_]
        if hasattr(self.best_estimator_, "classes_"):
            self.classes_ = self.best_estimator_.classes_
        if hasattr(self.best_estimator_, "n_features_in_"):
            self.n_features_in_ = self.best_estimator_.n_features_in_
        return self

    def predict(self, X):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    @available_if(lambda self: hasattr(self.estimator, "predict_proba"))
    def predict_proba(self, X):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(X)

    def score(self, X, y, sample_weight=None):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score(X, y, sample_weight=sample_weight)
