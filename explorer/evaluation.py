"""Evaluate imputers on data with their own gaps, by hiding observed entries.

Real incomplete data have no truth at their missing entries, so an imputer is scored on
entries it *could* have seen: a mechanism of :mod:`explorer.core.missingness.mechanisms` hides a share of
the **observed** entries (:func:`hide_observed`), the imputer is fitted on and imputes the data
with both kinds of gap, and the hidden entries are scored against their known values.

* :func:`evaluate` repeats this over several seeds for several imputers and returns a tidy
  table; :func:`summarize` reduces it to the mean and spread per imputer and metric.
* :func:`held_out_scorer` is a scikit-learn scorer, so ``GridSearchCV`` can tune an imputer by
  held-out observed entries of its validation rows.
* :func:`imputation_scores` scores one imputation (the metrics below).

Metrics (over the set H of hidden entries, x the true value, x̂ the imputation):

``nrmse``
    ``sqrt( mean_{(i,j) in H} ((x_ij - x̂_ij) / s_j)**2 )``: the RMSE in standardised units,
    pooled over hidden entries, where ``s_j`` is the standard deviation (ddof=0) of the
    **observed** entries of column j of the data given (before hiding); a column with s_j = 0
    uses s_j = 1. Imputing every hidden entry by its column's observed mean gives about 1 under
    MCAR. (This is not :func:`explorer.core.metrics.nrmse`, which normalises by the variance of
    the hidden true values pooled over columns and so mixes units.)
``mae``
    ``mean_{(i,j) in H} |x_ij - x̂_ij|`` in the data's own units
    (:func:`explorer.core.metrics.mae`).
``coverage``
    Fraction of hidden true values inside the equal-tailed ``level`` (default 95 %) predictive
    interval of their entry (:func:`explorer.core.metrics.interval_coverage`).
``nll``
    ``mean_{(i,j) in H} -log p(x_ij | observed entries of row i)``: the per-entry marginal
    predictive density (the other missing entries of the row, real or hidden, integrated out),
    in the data's units; a mixture's marginal is a 1-D mixture, not a Gaussian.

``pfc`` and ``logloss`` (tables with categorical columns)
    The proportion of falsely classified hidden categorical cells (the imputed level is not the true one), and
    ``mean -log p(true level | observed cells)`` from the imputer's ``predict_proba`` (per row, as
    :class:`~explorer.impute.mixed.MixedMixtureImputer`'s) or its ``category_probabilities_`` (the same for every
    row, as :class:`~explorer.baselines.MeanModeImputer`'s), probabilities clipped below at 1e-15; NaN for an
    imputer that gives no probabilities.

``coverage`` and ``nll`` need a predictive distribution: they are computed for estimators with a
``conditional(X)`` method (explorer's imputers: :class:`~explorer.core.gaussians.conditional.ConditionalMixture`,
its Student-t variant, the factor-analysis conditionals). An estimator with no ``conditional`` but a
``sample(X, n_imputations=..., random_state=...)`` method (:class:`~explorer.baselines.PMMImputer`) gets
``coverage`` from draws: the interval of a hidden entry is the equal-tailed empirical quantile range
(``numpy.quantile``, linear interpolation) of ``n_draws`` (default :data:`N_DRAWS` = 20) draws of it; with so
few draws the empirical interval is itself noisy and tends to cover a little less than ``level``. Its ``nll``
stays **NaN** (draws of observed values give no density). Any other imputer (scikit-learn's SimpleImputer,
IterativeImputer, KNNImputer, ...) gets the point metrics only: both are **NaN**.

The baselines :class:`~explorer.baselines.PMMImputer` and :class:`~explorer.baselines.MeanModeImputer` are
re-exported here, beside the functions that score them.
"""

from __future__ import annotations

import inspect
import math
import numbers
import time
import warnings

import numpy as np

from explorer.baselines import MeanModeImputer, PMMImputer
from explorer.core import metrics as _metrics
from explorer.core.gaussians.gaussian import normal_logpdf
from explorer.core.missingness.mask_helpers import emptied
from explorer.core.missingness.mechanisms import MaskResult
from explorer.core.validation import BadInputError, as_float_matrix, check_int
from explorer.utils.random_state import check_random_state

__all__ = ["CATEGORICAL_METRICS", "METRICS", "N_DRAWS", "observed_scale", "hide_observed", "entry_logpdf", "draws_interval",
           "imputation_scores", "evaluate", "summarize", "held_out_scorer", "PMMImputer", "MeanModeImputer"]

#: Metrics computed by :func:`evaluate`, in table order.
METRICS = ("nrmse", "mae", "coverage", "nll")

#: Draws per hidden entry behind the empirical interval of an estimator that samples but has no ``conditional``.
N_DRAWS = 20


# --------------------------------------------------------------------------- data
def _as_matrix(X) -> np.ndarray:
    """Float (n, D) copy of an array, DataFrame or IncompleteData; NaN = missing."""
    from explorer.core.data import IncompleteData

    if isinstance(X, IncompleteData):
        return np.array(X.values, dtype=np.float64)
    names = getattr(X, "columns", None)
    return as_float_matrix(X, name="X", columns=None if names is None else [str(c) for c in names])


def observed_scale(X) -> np.ndarray:
    """``s_j``: the standard deviation (ddof=0) of the observed entries of every column (1 if 0 or none)."""
    arr = _as_matrix(X)
    obs = ~np.isnan(arr)
    n = obs.sum(axis=0)
    mean = np.where(n > 0, np.nansum(arr, axis=0) / np.maximum(n, 1), 0.0)
    var = np.where(n > 0, np.nansum((arr - mean) ** 2, axis=0) / np.maximum(n, 1), 0.0)
    sd = np.sqrt(var)
    return np.where(sd > 0, sd, 1.0)


def hide_observed(X, mechanism="mcar", rate=0.2, random_state=None, **params):
    """Hide a share of the observed entries of ``X`` for evaluation.

    As :func:`explorer.masking.amputate` (``rate`` = fraction of the observed entries), with one
    rule for scoring: a row the mechanism would empty keeps its observed entries (none of them is
    hidden: with nothing observed an imputer can only return the marginal, and explorer's
    imputers refuse such rows by default). A mechanism that would empty a column is refused.

    Returns
    -------
    X_hidden : ndarray (n_samples, n_features)
        NaN at the real gaps and at the hidden entries.
    hidden : ndarray of bool
        True = hidden here (observed in ``X``, so ``X[hidden]`` is the truth).
    info : MaskResult
        ``realised_rate = hidden.sum() / n_observed`` after the rows were restored.
    """
    from explorer.masking import EmptyRowsWarning, amputate

    arr = _as_matrix(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyRowsWarning)
        _, hidden, info = amputate(arr, mechanism, rate, random_state, allow_empty="rows", return_info=True,
                                   **params)
    observed = ~np.isnan(arr)
    rows, _ = emptied(observed, hidden)
    hidden = hidden.copy()
    hidden[rows] = False
    n_obs = int(observed.sum())
    info = MaskResult(hidden, info.requested_rate, float(hidden.sum() / n_obs) if n_obs else 0.0,
                      info.mechanism, info.kind, info.params, n_obs)
    X_hidden = np.where(hidden, np.nan, arr)
    return X_hidden, hidden, info


# --------------------------------------------------------------------------- densities
def entry_logpdf(cond, truth, hidden) -> np.ndarray:
    """``log p(x_ij | observed entries of row i)`` of every hidden entry, row-major order.

    ``cond`` is the conditional of an imputer on the data with the entries hidden (hidden entries are
    missing in it). A conditional that knows its per-entry marginals answers itself (its ``entry_logpdf``:
    exact for :class:`~explorer.core.gaussians.conditional.ConditionalMixture`, the Student-t mixture of
    :mod:`~explorer.core.gaussians.conditional_t`, the factor models' conditionals of
    :mod:`~explorer.core.factor.fa_conditional` and :class:`~explorer.impute.transformed.TransformedImputer`'s);
    any other object with ``mean()`` and ``variance()`` is scored as a Gaussian with that mean and variance.
    """
    own = getattr(cond, "entry_logpdf", None)
    if callable(own):
        return own(truth, hidden)
    ri, ci = np.nonzero(hidden)
    x = np.asarray(truth, dtype=np.float64)[ri, ci]
    return normal_logpdf(x, cond.mean()[ri, ci], cond.variance()[ri, ci])


def draws_interval(draws, level) -> tuple[np.ndarray, np.ndarray]:
    """The equal-tailed empirical ``level`` interval of every entry, from draws (n_draws, n_samples, n_features).

    ``(lower, upper)``: the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles over the draws (``numpy.quantile``,
    linear interpolation), each of shape (n_samples, n_features).
    """
    alpha = (1.0 - float(level)) / 2.0
    lower, upper = np.quantile(np.asarray(draws, dtype=np.float64), [alpha, 1.0 - alpha], axis=0)
    return lower, upper


def _samples_only(est) -> bool:
    """An estimator with no ``conditional`` whose ``sample`` takes ``n_imputations`` and ``random_state``."""
    if hasattr(est, "conditional"):
        return False
    sample = getattr(est, "sample", None)
    if not callable(sample):
        return False
    try:
        params = inspect.signature(sample).parameters
    except (TypeError, ValueError):
        return False
    return "n_imputations" in params and "random_state" in params


# --------------------------------------------------------------------------- scores
def imputation_scores(truth, imputed, hidden, *, scale=None, interval=None, logpdf=None) -> dict:
    """The metrics of one imputation on the hidden entries (see the module docstring).

    Parameters
    ----------
    truth : array (n_samples, n_features)
        True values at the hidden entries (NaN allowed elsewhere).
    imputed : array, same shape
        The imputation; must be finite at the hidden entries.
    hidden : bool array, same shape
        True = hidden and scored.
    scale : array (n_features,), optional
        ``s_j`` of the NRMSE; default :func:`observed_scale` of ``truth`` with the hidden entries
        counted as observed (pass the scale of the data as given for the exact definition).
    interval : (lower, upper), optional
        Predictive intervals; without them ``coverage`` is NaN.
    logpdf : array (n_hidden,), optional
        Per-entry log densities (:func:`entry_logpdf`); without them ``nll`` is NaN.

    Returns
    -------
    dict
        ``{"nrmse", "mae", "coverage", "nll"}`` floats.
    """
    t = np.asarray(truth, dtype=np.float64)
    p = np.asarray(imputed, dtype=np.float64)
    h = np.asarray(hidden, dtype=bool)
    if p.shape != t.shape:
        raise BadInputError(
            f"the imputation has shape {p.shape} but the data have shape {t.shape}; an imputer must "
            "return every column (scikit-learn's SimpleImputer drops columns with no observed value "
            "unless keep_empty_features=True)."
        )
    s = observed_scale(t) if scale is None else np.asarray(scale, dtype=np.float64)
    mae = _metrics.mae(t, p, h)  # validates shapes, hidden entries, NaN imputations
    ri, ci = np.nonzero(h)
    z = (t[ri, ci] - p[ri, ci]) / s[ci]
    out = {"nrmse": float(np.sqrt(np.mean(z * z))), "mae": mae, "coverage": math.nan, "nll": math.nan}
    if interval is not None:
        out["coverage"] = _metrics.interval_coverage(t, interval[0], interval[1], h)
    if logpdf is not None:
        out["nll"] = float(_metrics.nll_from_logpdf(logpdf, reduction="mean"))
    return out


def _was_interrupted(est) -> bool:
    """True when the last fit of ``est`` (or of the imputer it wraps) ended on Ctrl-C (``stop_reason_ == "interrupted"``).

    explorer's imputers catch a KeyboardInterrupt raised after their first complete iteration,
    keep the best state and return normally; a loop of fits must then stop rather than start the
    next fit. Looks at ``est``, the ``imputer_`` of a :class:`~explorer.impute.transformed.TransformedImputer`
    and the steps of a scikit-learn ``Pipeline``.
    """
    seen = [est]
    inner = getattr(est, "imputer_", None)
    if inner is not None:
        seen.append(inner)
    for step in getattr(est, "steps", None) or ():
        if isinstance(step, tuple) and len(step) == 2:
            seen.append(step[1])
    return any(getattr(e, "stop_reason_", None) == "interrupted" for e in seen)


def _score_estimator(est, truth, X_hidden, hidden, scale, level, fit=True, what="", *, n_draws=N_DRAWS,
                     draw_seed=0, draws=True) -> dict:
    if fit:
        est.fit(X_hidden)
    if _was_interrupted(est):
        # the fit kept its state so far after Ctrl-C: stop the whole loop of fits here, not just this fit
        raise KeyboardInterrupt(f"the fit of {what or type(est).__name__} was interrupted (Ctrl-C)")
    imputed = np.asarray(est.transform(X_hidden), dtype=np.float64)
    interval = logpdf = None
    if hasattr(est, "conditional"):
        cond = est.conditional(X_hidden)
        interval = cond.interval(level)
        logpdf = entry_logpdf(cond, truth, hidden)
    elif draws and _samples_only(est):  # coverage from draws; no density, so nll stays NaN
        samples = np.asarray(est.sample(X_hidden, n_imputations=n_draws, random_state=draw_seed), dtype=np.float64)
        if samples.shape != (n_draws, *X_hidden.shape):
            raise BadInputError(
                f"{what or type(est).__name__}.sample returned shape {samples.shape}; expected (n_imputations, "
                f"n_samples, n_features) = {(n_draws, *X_hidden.shape)}."
            )
        interval = draws_interval(samples, level)
    return imputation_scores(truth, imputed, hidden, scale=scale, interval=interval, logpdf=logpdf)


def _named(imputers) -> dict:
    if isinstance(imputers, dict):
        return dict(imputers)
    if hasattr(imputers, "fit"):
        imputers = [imputers]
    out = {}
    for est in imputers:
        name = type(est).__name__
        k = 2
        while name in out:
            name = f"{type(est).__name__}#{k}"
            k += 1
        out[name] = est
    return out


def evaluate(imputers, X, *, mechanism="mcar", rate=0.2, n_repeats=5, random_state=0, level=0.95,
             n_draws=N_DRAWS, **params):
    """Score imputers on hidden observed entries of ``X``, over several seeds.

    For each repeat r a seed is drawn from ``random_state``; :func:`hide_observed` hides about
    ``rate`` of the observed entries by ``mechanism`` (the same hidden entries for every
    imputer); each imputer (a fresh :func:`sklearn.base.clone`) is fitted on the data with both
    the real and the hidden gaps, imputes them with ``transform``, and is scored on the hidden
    entries (metrics in the module docstring).

    Parameters
    ----------
    imputers : estimator, list of estimators, or dict name -> estimator
        explorer's imputers, or any scikit-learn transformer that fills NaN (SimpleImputer,
        IterativeImputer, KNNImputer, a Pipeline...). Names default to the class names.
    X : array-like, DataFrame or IncompleteData (n_samples, n_features)
        The data, NaN at its real gaps. A DataFrame with categorical, text or boolean columns
        (:func:`explorer.impute.mixed.categorical_columns`) is scored as a table: cells hidden completely at
        random among the observed ones (``mechanism="mcar"`` only), the imputers fitted on the DataFrame
        (:class:`~explorer.impute.mixed.MixedMixtureImputer`, :class:`~explorer.baselines.MeanModeImputer`, or a
        pipeline that takes one), the numeric metrics on the numeric columns (coverage and NLL from
        ``conditional``) and ``pfc`` / ``logloss`` (:data:`CATEGORICAL_METRICS`) on the categorical cells.
    mechanism : str, default "mcar"
        A key of :data:`explorer.core.missingness.mechanisms.MECHANISMS`.
    rate : float, default 0.2
        Fraction of the observed entries to hide.
    n_repeats : int, default 5
    random_state : int, Generator or None, default 0
        Seeds the repeats (int: reproducible table).
    level : float, default 0.95
        Level of the predictive intervals scored by ``coverage``.
    n_draws : int, default 20
        Draws per hidden entry for the empirical intervals of imputers that sample but have no
        ``conditional`` (:class:`~explorer.baselines.PMMImputer`), drawn with the repeat's ``seed``.
    **params
        Parameters of the mechanism.

    Returns
    -------
    pandas.DataFrame
        Tidy, one row per imputer x repeat x metric, columns ``imputer, repeat, seed, mechanism,
        rate, realised_rate, n_hidden, fit_seconds, metric, value``. ``seed`` reproduces the mask:
        ``hide_observed(X, mechanism, rate, random_state=seed)``. ``value`` is NaN for
        ``coverage`` / ``nll`` of imputers without ``conditional`` (except ``coverage`` of those with
        ``sample``, see the module docstring).

    Raises
    ------
    KeyboardInterrupt
        On Ctrl-C during a fit. explorer's imputers end an interrupted fit with the state reached
        so far (``stop_reason_ == "interrupted"``, a ``FitInterruptedWarning``) and return; evaluate
        then stops the whole loop after that fit instead of starting the next one.
    """
    import pandas as pd
    from sklearn.base import clone

    if isinstance(n_repeats, bool) or not isinstance(n_repeats, numbers.Integral) or n_repeats < 1:
        raise BadInputError(f"n_repeats must be a positive integer; got {n_repeats!r}.")
    check_int("n_draws", n_draws, 1)
    named = _named(imputers)
    if not named:
        raise BadInputError("evaluate needs at least one imputer.")
    seeds = check_random_state(random_state).integers(0, 2**31 - 1, size=n_repeats)
    if _has_categories(X):
        return _evaluate_table(named, X, mechanism, rate, seeds, level, params)
    truth = _as_matrix(X)
    scale = observed_scale(truth)
    rows = []
    for r, seed in enumerate(seeds):
        X_hidden, hidden, info = hide_observed(truth, mechanism, rate, int(seed), **params)
        if not hidden.any():
            raise BadInputError(
                f"{mechanism!r} at rate={rate!r} hid no observed entry (seed {int(seed)}); raise the rate."
            )
        for name, est in named.items():
            t0 = time.perf_counter()
            scores = _score_estimator(clone(est), truth, X_hidden, hidden, scale, level,
                                      what=f"{name!r} (repeat {r})", n_draws=n_draws, draw_seed=int(seed))
            seconds = time.perf_counter() - t0
            for metric in METRICS:
                rows.append({"imputer": name, "repeat": r, "seed": int(seed), "mechanism": mechanism,
                             "rate": rate, "realised_rate": info.realised_rate, "n_hidden": int(hidden.sum()),
                             "fit_seconds": seconds, "metric": metric, "value": scores[metric]})
    return pd.DataFrame(rows)


#: Metrics of the categorical cells of a table (:func:`evaluate` on a DataFrame with categorical columns).
CATEGORICAL_METRICS = ("pfc", "logloss")
#: Probabilities are clipped below at this before the log-loss (scikit-learn's convention): a level the
#: imputer gave probability 0 costs -log(1e-15) = 34.5 nats instead of infinity.
LOGLOSS_EPS = 1e-15


def _has_categories(X) -> bool:
    import pandas as pd

    if not isinstance(X, pd.DataFrame):
        return False
    from explorer.impute.mixed import categorical_columns

    return bool(categorical_columns(X))


def _level_probabilities(est, frame, column, n_rows):
    """(n_rows, levels) probabilities of ``column`` from ``predict_proba`` (dict of DataFrames, per row) or
    ``category_probabilities_`` (one Series for every row); None when the imputer gives none."""
    import pandas as pd

    proba = getattr(est, "predict_proba", None)
    if callable(proba):
        table = proba(frame)
        if isinstance(table, dict) and column in table:
            return table[column]
    freq = getattr(est, "category_probabilities_", None)
    if isinstance(freq, dict) and column in freq:
        series = freq[column]
        return pd.DataFrame(np.tile(series.to_numpy(dtype=float), (n_rows, 1)), columns=list(series.index))
    return None


def _table_scores(est, truth, hidden_frame, hidden, numeric, categorical, scale, level) -> dict:
    """The metrics of one fitted imputer on a table: numeric ones on its numeric columns, PFC and log-loss on its
    categorical ones (NaN where the imputer gives no distribution)."""
    out = dict.fromkeys(METRICS + CATEGORICAL_METRICS, float("nan"))
    filled = est.transform(hidden_frame)
    if numeric:
        idx = [truth.columns.get_loc(c) for c in numeric]
        h = hidden[:, idx]
        t = truth[numeric].to_numpy(dtype=float)
        imputed = filled[numeric].to_numpy(dtype=float)
        interval = logpdf = None
        cond = getattr(est, "conditional", None)
        order = list(getattr(est, "numeric_columns_", numeric))
        if callable(cond) and order == list(numeric) and h.any():
            c = cond(hidden_frame)
            interval = c.interval(level)
            logpdf = entry_logpdf(c, t, h)
        if h.any():
            out.update(imputation_scores(t, imputed, h, scale=scale, interval=interval, logpdf=logpdf))
    cat_hidden = [(c, hidden[:, truth.columns.get_loc(c)]) for c in categorical]
    n_cat = sum(int(m.sum()) for _, m in cat_hidden)
    if n_cat:
        wrong, losses = 0, []
        for c, m in cat_hidden:
            if not m.any():
                continue
            true = truth[c][m].astype(object).to_numpy()
            wrong += int(np.sum(filled[c][m].astype(object).to_numpy() != true))
            p = _level_probabilities(est, hidden_frame, c, len(truth))
            if p is None:
                losses = None
            elif losses is not None:
                cols = {v: j for j, v in enumerate(p.columns)}
                rows = np.flatnonzero(m)
                got = np.array([p.iat[i, cols[v]] if v in cols else 0.0 for i, v in zip(rows, true)])
                losses.extend(-np.log(np.clip(got, LOGLOSS_EPS, 1.0)))
        out["pfc"] = wrong / n_cat
        out["logloss"] = float(np.mean(losses)) if losses else float("nan")
    return out


def _evaluate_table(named, X, mechanism, rate, seeds, level, params):
    """:func:`evaluate` on a DataFrame with categorical columns: cells hidden completely at random among the
    observed ones; the numeric metrics on the numeric columns and PFC / log-loss on the categorical ones."""
    import pandas as pd
    from sklearn.base import clone

    from explorer.impute.mixed import categorical_columns

    if mechanism != "mcar" or params:
        raise BadInputError("on a table with categorical columns evaluate hides cells completely at random "
                            f"(mechanism='mcar', no parameters); got mechanism={mechanism!r}.")
    if not (isinstance(rate, (int, float)) and 0 < rate < 1):
        raise BadInputError(f"rate must be a number in (0, 1), got {rate!r}.")
    categorical = categorical_columns(X)
    numeric = [c for c in X.columns if c not in categorical]
    observed = X.notna().to_numpy()
    scale = observed_scale(X[numeric].apply(pd.to_numeric, errors="coerce")) if numeric else None
    rows = []
    for r, seed in enumerate(seeds):
        hidden = observed & (np.random.default_rng(int(seed)).random(X.shape) < rate)
        if not hidden.any():
            raise BadInputError(f"rate={rate!r} hid no observed cell (seed {int(seed)}); raise the rate.")
        hidden_frame = X.mask(hidden)
        for name, est in named.items():
            t0 = time.perf_counter()
            fitted = clone(est)
            fitted.fit(hidden_frame)
            scores = _table_scores(fitted, X, hidden_frame, hidden, numeric, categorical, scale, level)
            seconds = time.perf_counter() - t0
            for metric in METRICS + CATEGORICAL_METRICS:
                rows.append({"imputer": name, "repeat": r, "seed": int(seed), "mechanism": mechanism, "rate": rate,
                             "realised_rate": float(hidden.sum() / max(observed.sum(), 1)),
                             "n_hidden": int(hidden.sum()), "fit_seconds": seconds, "metric": metric,
                             "value": scores[metric]})
    return pd.DataFrame(rows)


def summarize(results):
    """Mean and spread of each metric per imputer, from the table of :func:`evaluate`.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``(imputer, metric)`` (imputers in their order of appearance), columns
        ``mean, std, min, max, n`` over the repeats (``std`` with ddof=1; NaN values, e.g. the
        coverage of a scikit-learn imputer, are left out, so ``n`` is 0 and ``mean`` NaN there).
    """
    import pandas as pd

    need = {"imputer", "metric", "value"}
    if not isinstance(results, pd.DataFrame) or not need <= set(results.columns):
        raise BadInputError("summarize expects the DataFrame returned by evaluate (columns imputer, metric, value).")
    g = results.groupby(["imputer", "metric"], sort=False)["value"]
    return g.agg(mean="mean", std="std", min="min", max="max", n="count")


# --------------------------------------------------------------------------- scikit-learn scorer
_SIGNS = {"nrmse": -1.0, "mae": -1.0, "nll": -1.0}


class _HeldOutScorer:
    """Callable ``scorer(estimator, X, y=None) -> float`` (greater is better); see :func:`held_out_scorer`."""

    def __init__(self, metric, mechanism, rate, random_state, level, params, n_draws=N_DRAWS):
        self.metric, self.mechanism, self.rate = metric, mechanism, rate
        self.random_state, self.level, self.params = random_state, level, params
        self.n_draws = n_draws

    def __repr__(self):
        return (f"held_out_scorer(metric={self.metric!r}, mechanism={self.mechanism!r}, rate={self.rate!r}, "
                f"random_state={self.random_state!r})")

    def __call__(self, estimator, X, y=None):
        truth = _as_matrix(X)
        X_hidden, hidden, _ = hide_observed(truth, self.mechanism, self.rate, self.random_state, **self.params)
        if not hidden.any():
            raise BadInputError(
                f"held_out_scorer: {self.mechanism!r} at rate={self.rate!r} hid no observed entry of the "
                f"{truth.shape[0]} validation rows; raise the rate or use fewer folds."
            )
        sampled = self.metric == "coverage" and _samples_only(estimator)
        if self.metric in ("coverage", "nll") and not hasattr(estimator, "conditional") and not sampled:
            also = " (or, for 'coverage', sample(X, n_imputations, random_state): PMMImputer)"
            raise BadInputError(
                f"held_out_scorer(metric={self.metric!r}) needs an estimator with conditional(X) "
                f"(explorer's imputers){also if self.metric == 'coverage' else ''}; {type(estimator).__name__} "
                "has none. Use 'nrmse' or 'mae'."
            )
        scores = _score_estimator(estimator, truth, X_hidden, hidden, observed_scale(truth), self.level,
                                  fit=False, n_draws=self.n_draws, draw_seed=self.random_state, draws=sampled)
        if self.metric == "coverage":
            return -abs(scores["coverage"] - self.level)
        return _SIGNS[self.metric] * scores[self.metric]


def held_out_scorer(metric="nrmse", mechanism="mcar", rate=0.2, random_state=0, level=0.95, n_draws=N_DRAWS,
                    **params):
    """A scikit-learn scorer that scores an imputer on hidden observed entries of the validation rows.

    ``GridSearchCV(GaussianMixtureImputer(), {"n_components": [1, 2, 3]},
    scoring=held_out_scorer(), cv=KFold(3))`` fits each candidate on the (incomplete) training
    rows; on the validation rows the scorer hides about ``rate`` of the observed entries by
    ``mechanism`` (:func:`hide_observed`), imputes them with the fitted estimator's
    ``transform`` and scores them. Greater is better: the score is ``-nrmse``, ``-mae``,
    ``-nll`` or ``-|coverage - level|``; the NRMSE scale ``s_j`` is that of the validation
    rows' observed entries.

    Parameters
    ----------
    metric : {"nrmse", "mae", "nll", "coverage"}, default "nrmse"
        "nll" needs an estimator with ``conditional(X)``; "coverage" one with ``conditional(X)`` or with
        ``sample(X, n_imputations, random_state)`` (empirical intervals of ``n_draws`` draws, seeded by
        ``random_state``).
    mechanism : str, default "mcar"
    rate : float, default 0.2
    random_state : int or None, default 0
        An int hides the same entries of a validation fold for every candidate (a fair
        comparison); None draws new entries at every call. A Generator would be consumed
        (different entries per candidate): pass an int.
    level : float, default 0.95
    n_draws : int, default 20
        Draws per hidden entry for ``metric="coverage"`` of an estimator that samples but has no ``conditional``.
    **params
        Parameters of the mechanism.

    A fitted estimator whose fit was interrupted by Ctrl-C (``stop_reason_ == "interrupted"``)
    makes the scorer raise KeyboardInterrupt, so one Ctrl-C stops a whole ``GridSearchCV``
    instead of only the fit it landed in.
    """
    if metric not in METRICS:
        raise BadInputError(f"metric must be one of {list(METRICS)}; got {metric!r}.")
    if random_state is not None and not (isinstance(random_state, numbers.Integral)
                                         and not isinstance(random_state, bool) and random_state >= 0):
        raise BadInputError(
            f"held_out_scorer: random_state must be a non-negative int or None (a Generator would hide "
            f"different entries for every candidate); got {random_state!r}."
        )
    check_int("n_draws", n_draws, 1)
    return _HeldOutScorer(metric, mechanism, rate, random_state, level, params, n_draws)
