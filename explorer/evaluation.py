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
    in the data's units on arrays and tables alike (the numeric cells of a table score exactly as the same
    numbers would in an array); a mixture's marginal is a 1-D mixture, not a Gaussian. The NLL of the
    standardised value ``x_ij / s_j`` is ``-log p(x_ij | ...) + log s_j``, so the NLL in standardised units is
    this one plus ``mean_{(i,j) in H} log s_j``; to compare NLLs across data sets, standardise the columns on
    their observed entries first (as explorer's benchmarks do).

``pfc`` and ``logloss`` (tables with categorical columns)
    The proportion of falsely classified hidden categorical cells (the imputed level is not the true one), and
    ``mean -log p(true level | observed cells)`` from the imputer's ``predict_proba`` (per row, as
    :class:`~explorer.impute.mixed.MixedMixtureImputer`'s) or its ``category_probabilities_`` (the same for every
    row, as :class:`~explorer.baselines.MeanModeImputer`'s), probabilities clipped below at 1e-15; NaN for an
    imputer that gives no probabilities.

``coverage`` and ``nll`` need a predictive distribution: they are computed for estimators with a
``conditional(X)`` method (explorer's imputers: :class:`~explorer.core.gaussians.conditional.ConditionalMixture`,
its Student-t variant, the factor-analysis conditionals). An estimator with no ``conditional`` but a
``sample(X, n_imputations=..., random_state=...)`` method (:class:`~explorer.baselines.PMMImputer`, or on a
table a wrapper that runs it there) gets ``coverage`` from draws: the interval of a hidden entry is the
equal-tailed empirical quantile range (``numpy.quantile``, linear interpolation) of ``n_draws`` (default
:data:`N_DRAWS` = 20) draws of it, seeded by the repeat's ``seed``; with so few draws the empirical interval is
itself noisy and tends to cover a little less than ``level``. Its ``nll`` stays **NaN** (draws of observed values
give no density). Any other imputer (scikit-learn's SimpleImputer, IterativeImputer, KNNImputer, ...) gets the
point metrics only: both are **NaN**. On a table the output's ``coverage_from`` column says, on the coverage rows,
which interval was scored: ``"conditional"`` (the conditional's analytic interval) or ``"draws"``.

Does better imputation help downstream? :func:`evaluate_downstream` (or ``evaluate(..., downstream=estimator,
y=y)``) scores imputers by what a regressor trained on their imputations predicts: rows split train / test, input
cells of both hidden (the target never), each imputer fitted on the train inputs, a regressor fitted on the imputed
train rows and scored by test ``mse`` and ``r2``; a mixture is also scored as the regressor itself (its conditional
mean of the target given the observed inputs), as in Delalleau, Courville & Bengio's (2012) Abalone experiment.

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
           "imputation_scores", "evaluate", "evaluate_downstream", "DOWNSTREAM_METRICS", "ITSELF",
           "summarize", "held_out_scorer", "PMMImputer", "MeanModeImputer"]

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
    fit_seconds = math.nan
    if fit:
        t0 = time.perf_counter()
        est.fit(X_hidden)
        fit_seconds = time.perf_counter() - t0
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
    scores = imputation_scores(truth, imputed, hidden, scale=scale, interval=interval, logpdf=logpdf)
    scores["fit_seconds"] = fit_seconds  # the fit alone, not the imputation or the scoring
    return scores


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
             n_draws=N_DRAWS, downstream=None, y=None, **params):
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
        (:func:`explorer.impute.mixed.categorical_columns`) is scored as a table: every observed cell hidden
        with probability ``rate`` (``mechanism="mcar"`` only; as on arrays, a row left with no observed cell
        keeps all its cells, and a column left with none is refused), the imputers fitted on the DataFrame
        (:class:`~explorer.impute.mixed.MixedMixtureImputer`, :class:`~explorer.baselines.MeanModeImputer`, or a
        pipeline that takes one), the numeric metrics on the numeric columns (coverage and NLL from
        ``conditional``, or coverage from ``n_draws`` draws of an imputer that only has ``sample``, NLL in the
        data's units as on arrays) and ``pfc`` / ``logloss`` (:data:`CATEGORICAL_METRICS`) on the categorical
        cells.
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
        ``conditional`` (:class:`~explorer.baselines.PMMImputer`), on arrays and tables, drawn with the
        repeat's ``seed``.
    downstream : regressor, optional
        With ``y``: score the imputers by the test error of this regressor trained on their imputations instead
        of on the hidden entries; ``evaluate`` then returns :func:`evaluate_downstream`'s table
        (``rates=(rate,)``, or ``rate`` itself when it is a list of rates; ``level`` and ``n_draws`` are unused).
    y : array-like (n_samples,), optional
        The target of ``downstream`` (never hidden); only with ``downstream``.
    **params
        Parameters of the mechanism.

    Returns
    -------
    pandas.DataFrame
        Tidy, one row per imputer x repeat x metric, columns ``imputer, repeat, seed, mechanism,
        rate, realised_rate, n_hidden, fit_seconds, metric, value``, and on a table ``coverage_from``
        (``"conditional"`` or ``"draws"`` on the coverage rows, empty elsewhere). ``seed`` reproduces the mask:
        ``hide_observed(X, mechanism, rate, random_state=seed)`` (on a table: the observed cells where
        ``numpy.random.default_rng(seed).random(X.shape) < rate``, less those of the rows this would empty).
        ``fit_seconds`` is the time of ``fit`` alone (not the imputation, the draws or the scoring). ``value``
        is NaN for ``coverage`` / ``nll`` of imputers without ``conditional`` (except ``coverage`` of those
        with ``sample``, see the module docstring).

    Raises
    ------
    KeyboardInterrupt
        On Ctrl-C during a fit. explorer's imputers end an interrupted fit with the state reached
        so far (``stop_reason_ == "interrupted"``, a ``FitInterruptedWarning``) and return; evaluate
        then stops the whole loop after that fit instead of starting the next one.
    """
    import pandas as pd
    from sklearn.base import clone

    if downstream is not None or y is not None:
        if downstream is None or y is None:
            raise BadInputError("evaluate(downstream=..., y=...) needs both the regressor and the target; got "
                                f"downstream={'None' if downstream is None else type(downstream).__name__} and "
                                f"y={'None' if y is None else 'an array'}.")
        rates = tuple(rate) if isinstance(rate, (list, tuple, np.ndarray)) else (rate,)
        return evaluate_downstream(imputers, X, y, estimator=downstream, mechanism=mechanism, rates=rates,
                                   n_repeats=n_repeats, random_state=random_state, **params)
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, numbers.Integral) or n_repeats < 1:
        raise BadInputError(f"n_repeats must be a positive integer; got {n_repeats!r}.")
    check_int("n_draws", n_draws, 1)
    named = _named(imputers)
    if not named:
        raise BadInputError("evaluate needs at least one imputer.")
    seeds = check_random_state(random_state).integers(0, 2**31 - 1, size=n_repeats)
    if _has_categories(X):
        return _evaluate_table(named, X, mechanism, rate, seeds, level, params, n_draws)
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
            scores = _score_estimator(clone(est), truth, X_hidden, hidden, scale, level,
                                      what=f"{name!r} (repeat {r})", n_draws=n_draws, draw_seed=int(seed))
            for metric in METRICS:
                rows.append({"imputer": name, "repeat": r, "seed": int(seed), "mechanism": mechanism,
                             "rate": rate, "realised_rate": info.realised_rate, "n_hidden": int(hidden.sum()),
                             "fit_seconds": scores["fit_seconds"], "metric": metric, "value": scores[metric]})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- downstream
#: Metrics of :func:`evaluate_downstream`, in table order.
DOWNSTREAM_METRICS = ("mse", "nmse", "r2")
#: The ``estimator`` of the rows where a joint model is the regressor itself (:func:`evaluate_downstream`).
ITSELF = "itself"


def _downstream_target(y, n: int) -> np.ndarray:
    """``y`` as a finite float vector of length ``n`` (a clear error otherwise)."""
    values = getattr(y, "values", y)  # a pandas Series / one-column DataFrame
    arr = np.asarray(values)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise BadInputError(f"y must be one target per row (shape (n_samples,)); got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise BadInputError(f"y has {arr.shape[0]} values but X has {n} rows; give one target per row of X.")
    try:
        arr = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise BadInputError("y must be numeric (a regression target); encode a text target first.") from None
    bad = ~np.isfinite(arr)
    if bad.any():
        raise BadInputError(f"y has {int(bad.sum())} missing or infinite value(s) (first at row "
                            f"{int(np.flatnonzero(bad)[0])}): the target is never imputed here; drop those rows.")
    return arr


def _downstream_named(estimator) -> dict:
    """Name -> regressor, each checked for ``fit`` and ``predict``."""
    named = _named(estimator if isinstance(estimator, (dict, list, tuple)) else [estimator])
    if not named:
        raise BadInputError("evaluate_downstream needs at least one downstream estimator.")
    for name, est in named.items():
        if not (callable(getattr(est, "fit", None)) and callable(getattr(est, "predict", None))):
            raise BadInputError(
                f"the downstream estimator {name!r} ({type(est).__name__}) has no fit(X, y) and predict(X): give a "
                "scikit-learn regressor (e.g. sklearn.kernel_ridge.KernelRidge, a Pipeline ending in one)."
            )
    if ITSELF in named:
        raise BadInputError(f"{ITSELF!r} names the rows where a mixture is the regressor; rename that estimator.")
    return named


def _check_rates(rates) -> tuple:
    rates = tuple(np.atleast_1d(np.asarray(rates, dtype=object)).tolist())
    if not rates:
        raise BadInputError("rates must hold at least one missing rate.")
    for r in rates:
        if isinstance(r, bool) or not isinstance(r, numbers.Real) or not 0 <= r < 1:
            raise BadInputError(f"every rate must be a number in [0, 1) (a fraction of the observed input cells); "
                                f"got {r!r}.")
    return rates


def _n_test(test_size, n: int) -> int:
    if isinstance(test_size, numbers.Integral) and not isinstance(test_size, bool):
        k = int(test_size)
    elif isinstance(test_size, numbers.Real) and not isinstance(test_size, bool) and 0 < test_size < 1:
        k = int(round(test_size * n))
    else:
        raise BadInputError(f"test_size must be a fraction in (0, 1) or a number of rows; got {test_size!r}.")
    if not 1 <= k <= n - 2:
        raise BadInputError(f"test_size={test_size!r} leaves {k} test and {n - k} train rows of {n}; both need "
                            "rows (at least 1 test and 2 train).")
    return k


def _finite_output(out, shape, what: str) -> np.ndarray:
    arr = np.asarray(out, dtype=np.float64)
    if arr.shape != shape:
        raise BadInputError(f"{what} returned shape {arr.shape}; expected {shape} (scikit-learn's SimpleImputer "
                            "drops a column with no observed value unless keep_empty_features=True).")
    if not np.isfinite(arr).all():
        raise BadInputError(f"{what} returned {int((~np.isfinite(arr)).sum())} missing or infinite value(s).")
    return arr


def _regression_scores(truth, pred, y_train) -> dict:
    err = truth - pred
    mse = float(np.mean(err * err))
    sst = float(np.sum((truth - truth.mean()) ** 2))
    r2 = 1.0 - float(np.sum(err * err)) / sst if sst > 0 else math.nan
    var = float(np.var(y_train))
    return {"mse": mse, "nmse": mse / var if var > 0 else math.nan, "r2": r2}


def evaluate_downstream(imputers, X, y, *, estimator, mechanism="mcar", rates=(0.0, 0.2, 0.4, 0.6), n_repeats=5,
                        random_state=0, test_size=0.5, as_regressor="auto", **params):
    """Does better imputation help downstream? Test error of a regressor trained on each imputer's imputations.

    The protocol of Delalleau, Courville & Bengio's (2012) Abalone experiment (section IV-B). For each repeat r a
    seed is drawn from ``random_state``; it splits the rows into train and test (the test rows are the first
    ``n_test`` of ``numpy.random.default_rng(seed).permutation(n_samples)``; the same split for every rate) and, for
    each rate, :func:`hide_observed` hides about ``rate`` of the observed **input** cells of all rows (the
    same cells for every imputer; ``y`` is never hidden; rate 0 hides nothing). Then, for each imputer (a fresh
    :func:`sklearn.base.clone`): fitted on the train inputs, it imputes the train and the test inputs
    (``transform``); each downstream estimator (a fresh clone) is fitted on the imputed train rows and ``y``, and
    predicts the imputed test rows. Each imputer of ``as_regressor`` is also **the regressor itself**: a clone is
    fitted on the train rows' ``[inputs, y]`` and predicts the test target as its ``transform`` of
    ``[test inputs, NaN]``, i.e. for a mixture the conditional mean ``E[y | observed inputs]``.

    Parameters
    ----------
    imputers : estimator, list of estimators, or dict name -> estimator
        As in :func:`evaluate`: explorer's imputers or any transformer that fills NaN.
    X : array-like, DataFrame or IncompleteData (n_samples, n_features)
        The numeric inputs (NaN at real gaps, if any). Text or categorical columns are refused: encode them first
        (:func:`explorer.io.encode_categoricals`).
    y : array-like (n_samples,)
        The numeric target, finite.
    estimator : regressor, list or dict name -> regressor
        Anything with ``fit(X, y)`` and ``predict(X)`` (e.g. a scikit-learn Pipeline). Every regressor is trained
        on the same imputations. Wrap it in ``sklearn.compose.TransformedTargetRegressor`` to train on a
        standardised target, as the paper does.
    mechanism : str, default "mcar"
        A key of :data:`explorer.core.missingness.mechanisms.MECHANISMS`, applied to the inputs.
    rates : sequence of float in [0, 1), default (0, 0.2, 0.4, 0.6)
        Fractions of the observed input cells to hide.
    n_repeats : int, default 5
    random_state : int, Generator or None, default 0
        Seeds the repeats (int: reproducible table).
    test_size : float in (0, 1) or int, default 0.5
        Share (or number) of the rows in the test set.
    as_regressor : "auto", sequence of names or None, default "auto"
        The imputers also scored as the regressor itself. ``"auto"``: those with a ``conditional`` method
        (explorer's density models); None or ``()``: none.
    **params
        Parameters of the mechanism.

    Returns
    -------
    pandas.DataFrame
        Tidy, one row per imputer x estimator x rate x repeat x metric, columns ``imputer, estimator, repeat,
        seed, mechanism, rate, realised_rate, n_train, n_test, fit_seconds, metric, value``. ``estimator`` is
        :data:`ITSELF` (``"itself"``) on the rows where the imputer is the regressor. Metrics
        (:data:`DOWNSTREAM_METRICS`) on the test rows: ``mse`` (mean of (y - ŷ)², the target's units squared),
        ``nmse`` (``mse`` over the variance (ddof=0) of the train targets: the MSE on the target standardised on
        the train rows, the paper's scale) and ``r2`` (1 - SSE / SST, SST about the test mean, as
        ``sklearn.metrics.r2_score``). ``fit_seconds`` counts the imputer's fit and transforms plus the
        regressor's fit and predict. :func:`summarize` gives the mean and spread per rate, estimator and imputer.

    Raises
    ------
    BadInputError
        Before any fit: ``y`` of the wrong length, not numeric or with missing values, an estimator without
        ``fit`` / ``predict``, text or categorical columns in ``X``, a rate outside [0, 1), a bad ``test_size``,
        an unknown name in ``as_regressor``.
    KeyboardInterrupt
        On Ctrl-C during an explorer fit (as :func:`evaluate`).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.impute import SimpleImputer
    >>> from sklearn.linear_model import LinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3))
    >>> y = X @ [1.0, -1.0, 0.5] + 0.1 * rng.normal(size=60)
    >>> table = evaluate_downstream(SimpleImputer(), X, y, estimator=LinearRegression(), rates=[0.0, 0.3],
    ...                             n_repeats=2)
    >>> sorted(set(table["metric"])), len(table)
    (['mse', 'nmse', 'r2'], 12)
    """
    import pandas as pd
    from sklearn.base import clone

    if isinstance(X, pd.DataFrame) and _has_categories(X):
        from explorer.impute.mixed import categorical_columns

        raise BadInputError(
            f"evaluate_downstream needs numeric inputs; X has text or categorical column(s) "
            f"{list(categorical_columns(X))}. Encode them first, e.g. explorer.io.encode_categoricals(X) (one-hot) "
            "or pandas.get_dummies."
        )
    truth = _as_matrix(X)
    n = truth.shape[0]
    target = _downstream_target(y, n)
    estimators = _downstream_named(estimator)
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, numbers.Integral) or n_repeats < 1:
        raise BadInputError(f"n_repeats must be a positive integer; got {n_repeats!r}.")
    rates = _check_rates(rates)
    n_test = _n_test(test_size, n)
    named = _named(imputers)
    if not named:
        raise BadInputError("evaluate_downstream needs at least one imputer.")
    if as_regressor == "auto":
        joint = [name for name, est in named.items() if hasattr(est, "conditional")]
    elif as_regressor is None:
        joint = []
    else:
        joint = [as_regressor] if isinstance(as_regressor, str) else list(as_regressor)
        unknown = [j for j in joint if j not in named]
        if unknown:
            raise BadInputError(f"as_regressor names {unknown}, which are not imputers; imputers: {list(named)}.")
    seeds = check_random_state(random_state).integers(0, 2**31 - 1, size=n_repeats)
    rows = []

    def record(imputer, est_name, r, seed, rate, realised, seconds, scores, n_train):
        for metric in DOWNSTREAM_METRICS:
            rows.append({"imputer": imputer, "estimator": est_name, "repeat": r, "seed": int(seed),
                         "mechanism": mechanism, "rate": rate, "realised_rate": realised, "n_train": n_train,
                         "n_test": n_test, "fit_seconds": seconds, "metric": metric, "value": scores[metric]})

    def fitted(est, data, what):
        est.fit(data)
        if _was_interrupted(est):
            raise KeyboardInterrupt(f"the fit of {what} was interrupted (Ctrl-C)")
        return est

    for r, seed in enumerate(seeds):
        order = np.random.default_rng(int(seed)).permutation(n)
        test, train = np.sort(order[:n_test]), np.sort(order[n_test:])
        y_train, y_test = target[train], target[test]
        for rate in rates:
            if rate == 0:
                X_hidden, realised = truth.copy(), 0.0
            else:
                X_hidden, _, info = hide_observed(truth, mechanism, rate, int(seed), **params)
                realised = info.realised_rate
            if not (~np.isnan(X_hidden[train])).any(axis=0).all():
                raise BadInputError(f"{mechanism!r} at rate={rate!r} left a column with no observed train value "
                                    f"(seed {int(seed)}); lower the rate or use more rows.")
            X_train, X_test = X_hidden[train], X_hidden[test]
            for name, imp in named.items():
                what = f"{name!r} (rate {rate}, repeat {r})"
                t0 = time.perf_counter()
                fit = fitted(clone(imp), X_train, what)
                filled_train = _finite_output(fit.transform(X_train), X_train.shape, f"the imputer {what}")
                filled_test = _finite_output(fit.transform(X_test), X_test.shape, f"the imputer {what}")
                imputing = time.perf_counter() - t0
                for est_name, est in estimators.items():
                    t1 = time.perf_counter()
                    reg = clone(est).fit(filled_train, y_train)
                    pred = _finite_output(np.ravel(reg.predict(filled_test)), y_test.shape,
                                          f"the estimator {est_name!r} on {what}")
                    record(name, est_name, r, seed, rate, realised, imputing + time.perf_counter() - t1,
                           _regression_scores(y_test, pred, y_train), len(train))
            for name in joint:
                what = f"{name!r} as the regressor (rate {rate}, repeat {r})"
                t0 = time.perf_counter()
                model = fitted(clone(named[name]), np.column_stack([X_train, y_train]), what)
                query = np.column_stack([X_test, np.full(len(test), np.nan)])
                pred = _finite_output(model.transform(query), query.shape, what)[:, -1]
                record(name, ITSELF, r, seed, rate, realised, time.perf_counter() - t0,
                       _regression_scores(y_test, pred, y_train), len(train))
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


def _numeric_draws(samples, frame, numeric, n_draws, what) -> np.ndarray:
    """(n_draws, n_rows, len(numeric)) floats of the numeric columns of a table imputer's ``sample``: a list of
    DataFrames (:class:`~explorer.impute.mixed.MixedMixtureImputer`), a stacked DataFrame of ``n_draws`` x rows
    (a DataFrame's ``sample`` in explorer), or an array (n_draws, n_rows, n_columns) in the table's column order."""
    import pandas as pd

    n = frame.shape[0]
    if isinstance(samples, (list, tuple)) and all(isinstance(d, pd.DataFrame) for d in samples) and \
            len(samples) == n_draws and all(d.shape[0] == n for d in samples):
        return np.stack([d[numeric].to_numpy(dtype=np.float64) for d in samples])
    if isinstance(samples, pd.DataFrame) and samples.shape[0] == n_draws * n:
        return samples[numeric].to_numpy(dtype=np.float64).reshape(n_draws, n, len(numeric))
    if isinstance(samples, np.ndarray) and samples.shape == (n_draws, *frame.shape):
        return samples[:, :, [frame.columns.get_loc(c) for c in numeric]].astype(np.float64)
    shape = getattr(samples, "shape", None) or (len(samples) if isinstance(samples, (list, tuple)) else "?")
    raise BadInputError(
        f"{what}.sample returned {type(samples).__name__} of shape {shape}; on a table evaluate expects "
        f"{n_draws} DataFrames of the table's columns, one DataFrame of {n_draws} x {n} rows, or an array "
        f"(n_imputations, n_samples, n_columns) = {(n_draws, *frame.shape)}."
    )


def _table_scores(est, truth, hidden_frame, hidden, numeric, categorical, scale, level, *, n_draws=None,
                  draw_seed=0, what="") -> dict:
    """The metrics of one fitted imputer on a table: numeric ones on its numeric columns, PFC and log-loss on its
    categorical ones (NaN where the imputer gives no distribution).

    Coverage and NLL come from ``conditional`` when the imputer has one (in the order of its numeric columns);
    with ``n_draws`` (:func:`evaluate` passes it), an imputer with no ``conditional`` but a ``sample(X,
    n_imputations, random_state)`` gets the coverage of the empirical intervals of ``n_draws`` draws seeded by
    ``draw_seed``, as on arrays. ``out["coverage_from"]`` says which: ``"conditional"``, ``"draws"`` or None.
    """
    out = dict.fromkeys(METRICS + CATEGORICAL_METRICS, float("nan"))
    out["coverage_from"] = None
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
            out["coverage_from"] = "conditional"
        elif n_draws and h.any() and _samples_only(est):  # coverage from draws; no density, so nll stays NaN
            samples = est.sample(hidden_frame, n_imputations=n_draws, random_state=draw_seed)
            interval = draws_interval(_numeric_draws(samples, hidden_frame, numeric, n_draws,
                                                     what or type(est).__name__), level)
            out["coverage_from"] = "draws"
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


def _table_mask(X, observed, rate, seed) -> np.ndarray:
    """The hidden cells of a table for one repeat: every observed cell with probability ``rate``; a row left with
    no observed cell keeps them all (as :func:`hide_observed` on arrays); a column left with none is refused."""
    hidden = observed & (np.random.default_rng(int(seed)).random(X.shape) < rate)
    rows, cols = emptied(observed, hidden)
    hidden[rows] = False
    _, cols = emptied(observed, hidden)
    if cols.size:
        names = ", ".join(repr(str(X.columns[j])) for j in cols[:5])
        raise BadInputError(f"rate={rate!r} would hide every observed cell of column(s) {names} (seed {int(seed)}); "
                            "lower the rate, or drop columns with so few observed cells.")
    return hidden


def _evaluate_table(named, X, mechanism, rate, seeds, level, params, n_draws=N_DRAWS):
    """:func:`evaluate` on a DataFrame with categorical columns: cells hidden completely at random among the
    observed ones (:func:`_table_mask`); the numeric metrics on the numeric columns and PFC / log-loss on the
    categorical ones; ``fit_seconds`` times the fit alone."""
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
        hidden = _table_mask(X, observed, rate, seed)
        if not hidden.any():
            raise BadInputError(f"rate={rate!r} hid no observed cell (seed {int(seed)}); raise the rate.")
        hidden_frame = X.mask(hidden)
        for name, est in named.items():
            what = f"{name!r} (repeat {r})"
            fitted = clone(est)
            t0 = time.perf_counter()
            fitted.fit(hidden_frame)
            seconds = time.perf_counter() - t0
            if _was_interrupted(fitted):
                raise KeyboardInterrupt(f"the fit of {what} was interrupted (Ctrl-C)")
            scores = _table_scores(fitted, X, hidden_frame, hidden, numeric, categorical, scale, level,
                                   n_draws=n_draws, draw_seed=int(seed), what=name)
            for metric in METRICS + CATEGORICAL_METRICS:
                source = scores["coverage_from"] if metric == "coverage" and np.isfinite(scores[metric]) else None
                rows.append({"imputer": name, "repeat": r, "seed": int(seed), "mechanism": mechanism, "rate": rate,
                             "realised_rate": float(hidden.sum() / max(observed.sum(), 1)),
                             "n_hidden": int(hidden.sum()), "fit_seconds": seconds, "metric": metric,
                             "value": scores[metric], "coverage_from": source})
    return pd.DataFrame(rows)


def summarize(results):
    """Mean and spread of each metric per imputer, from the table of :func:`evaluate`.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``(imputer, metric)`` (imputers in their order of appearance), columns
        ``mean, std, min, max, n`` over the repeats (``std`` with ddof=1; NaN values, e.g. the
        coverage of a scikit-learn imputer, are left out, so ``n`` is 0 and ``mean`` NaN there).
        The table of :func:`evaluate_downstream` (it has an ``estimator`` column) is indexed by
        ``(rate, estimator, imputer, metric)``.
    """
    import pandas as pd

    need = {"imputer", "metric", "value"}
    if not isinstance(results, pd.DataFrame) or not need <= set(results.columns):
        raise BadInputError("summarize expects the DataFrame returned by evaluate (columns imputer, metric, value).")
    keys = ["rate", "estimator", "imputer", "metric"] if "estimator" in results.columns else ["imputer", "metric"]
    g = results.groupby(keys, sort=False)["value"]
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
