r"""Choosing the number of mixture components K (held-out observed entries, or BIC), and the prior's shrinkage.

``n_components="auto"`` of :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer` calls
:func:`select_n_components` with its default rule, the variational mixture's effective components;
:class:`~explorer.impute.factor.MFAImputer` uses the held-out likelihood.

**The variational mixture's effective components** (``criterion="dpgmm"``, the default): a
:class:`~explorer.impute.dp_mixture.DPGMMImputer` with its defaults (truncation 15, or the number of rows if fewer;
data-scaled prior) is fitted once and K is the number of components with :math:`E[\pi_k] > 0.01` (``n_effective_``)
and at least D expected rows (:math:`n E[\pi_k] \ge D`: a smaller one would have its covariance set by the prior,
and EM warns about it), capped by the grid's largest K. Should the EM fit at that K still leave a component with
fewer than D expected rows (``ComponentCollapseWarning``), :func:`fit_auto` refits with fewer components until none
does (the table then has a last row with ``collapsed_at``). Measured against the two rules below and fixed K on the six benchmark data sets
(``results/k_selection.md``), its NRMSE was within 0.5 % of the held-out rule's on every set (the same K on
Ionosphere and hepatitis, better on breast cancer, at most 0.0032 worse on iris, wine and Boston), its held-out NLL
better on three of the four sets where they differ (worse on wine), and it costs one variational fit instead of
about ten EM fits.

**Held-out likelihood** (``criterion="heldout"``, the rule of ``MFAImputer``). For each of ``n_repeats`` masks, a
share ``rate`` of the observed entries is hidden completely at random
(:func:`explorer.evaluation.hide_observed`), the imputer is fitted with each K on what is left, and
the hidden entries are scored by their predictive log-density
:math:`\log p(x_{ij} \mid x_i^{o})` (:func:`explorer.evaluation.entry_logpdf`: the same conditional
whose intervals and draws the imputer returns). The criterion is the mean negative log-density per
hidden entry over the masks; the smallest K within ``min_gain`` (0.02 nats) of the lowest wins. It measures what an imputer is for, needs
no parameter count, and penalises over-confident intervals as much as wrong centres.

**BIC** (``criterion="bic"``): :math:`-2\,\ell + p \log n` of one fit per K on all the data, with
:math:`\ell` the observed-data log-likelihood and :math:`p = (K-1) + K D + K D (D+1)/2` free
parameters for full covariances (2KD + K - 1 for diagonal ones; for factor analysers the mean,
the loadings less their rotations and the noise variances). A classic, cheap, and on small incomplete data it often picks K = 1 (the
penalty counts every covariance entry as a full parameter although the prior shrinks them).

**The prior's shrinkage** (:func:`select_shrinkage`, ``prior_shrinkage="auto"`` of ``GaussianMixtureImputer``): the
same held-out score chooses how far the default prior's covariance mode is shrunk towards its diagonal, at the K of
the fit, on small data only (:func:`shrinkage_selected`).

The grid (``grid=None``): K = 1, 2, 3, 4, 5, 6, 8, keeping K <= n_rows / n_features (at least 1).
The scan stops early when two successive K fail to improve the best score by ``min_gain``
(``patience``). Cost: about ``n_repeats`` x (number of K tried) fits on
``(1 - rate)`` of the entries, plus the final fit.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
from sklearn.base import clone

from explorer.core.mixtures.em_gmm import ComponentCollapseWarning
from explorer.core.validation import BadInputError
from explorer.evaluation import _as_matrix, entry_logpdf, hide_observed
from explorer.impute.dp_mixture import DPGMMImputer

__all__ = ["DEFAULT_GRID", "KSelection", "ShrinkageSelection", "SHRINKAGE_MAX_ENTRIES", "SHRINKAGE_MIN_RULE",
           "default_grid", "fit_auto", "select_n_components", "select_shrinkage", "shrinkage_selected"]

DEFAULT_GRID = (1, 2, 3, 4, 5, 6, 8)
CRITERIA = ("dpgmm", "heldout", "bic")


@dataclass(frozen=True)
class KSelection:
    """The outcome of :func:`select_n_components`.

    ``n_components``: the chosen K. ``table``: one dict per K tried, with ``n_components``,
    ``score`` (the criterion, lower is better: mean held-out negative log-density per entry, or BIC)
    and ``per_repeat`` (held-out only). ``criterion``, ``rate``, ``n_repeats`` as used.
    """

    n_components: int
    criterion: str
    table: tuple
    rate: float
    n_repeats: int
    min_gain: float = 0.0

    def to_frame(self):
        """The table as a pandas DataFrame (one row per K tried)."""
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in row.items() if k != "per_repeat"} for row in self.table])


def default_grid(n_samples: int, n_features: int) -> tuple[int, ...]:
    """:data:`DEFAULT_GRID` without the K above ``n_samples / n_features`` (always keeps K = 1)."""
    cap = max(1, n_samples // max(1, n_features))
    return tuple(k for k in DEFAULT_GRID if k == 1 or k <= cap)


def _n_parameters(est, D: int) -> int:
    K = est.weights_.shape[0]
    cov = np.asarray(est.covariances_) if hasattr(est, "covariances_") else None
    if cov is not None and cov.ndim == 2:  # diagonal
        per = D + D
    elif hasattr(est, "loadings_"):
        q = np.asarray(est.loadings_).shape[-1]
        per = D + D * q - q * (q - 1) // 2 + D
    else:
        per = D + D * (D + 1) // 2
    return (K - 1) + K * per


def _dpgmm_components(estimator, X, grid) -> KSelection:
    """K = the effective components (E[pi_k] > 0.01) of a default DPGMMImputer, capped by the grid's largest K."""
    arr = _as_matrix(X)
    grid = default_grid(*arr.shape) if grid is None else tuple(grid)
    params = estimator.get_params()
    seed = params.get("random_state")
    n_rows = int((~np.isnan(arr)).any(axis=1).sum())
    dp = DPGMMImputer(n_components=max(1, min(max(15, max(grid)), n_rows)), random_state=seed if isinstance(seed, (int, np.integer)) else 0,
                      empty_rows=params.get("empty_rows", "raise"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dp.fit(arr)
    # a component needs about as many expected rows as features to have a covariance of its own (EM warns
    # about smaller ones, em_gmm.collapsed_components): count the effective components that have them
    supported = int(np.sum((dp.weights_ > 0.01) & (dp.weights_ * n_rows >= arr.shape[1])))
    K = int(min(max(1, min(dp.n_effective_, supported)), max(grid)))
    row = {"n_components": K, "score": float(dp.n_effective_), "supported": supported, "per_repeat": (),
           "weights": tuple(float(w) for w in np.sort(dp.weights_)[::-1])}
    return KSelection(n_components=K, criterion="dpgmm", table=(row,), rate=0.0, n_repeats=0)


def select_n_components(estimator, X, grid=None, *, criterion="dpgmm", rate=0.1, n_repeats=2, patience=2,
                        min_gain=None, random_state=0) -> KSelection:
    """Choose K for ``estimator`` (an explorer mixture imputer) on the incomplete data ``X``.

    Parameters
    ----------
    estimator : GaussianMixtureImputer or MFAImputer (or any estimator with ``n_components`` and
        ``conditional(X)``); cloned, never fitted itself.
    X : array-like (n_samples, n_features), NaN = missing.
    grid : sequence of int, optional
        Candidate K in increasing order; default :func:`default_grid`.
    criterion : {"dpgmm", "heldout", "bic"}, default "dpgmm"
        See the module docstring. For ``"dpgmm"`` the table has one row whose ``score`` is the
        variational mixture's effective number of components (before the grid's cap).
    rate : float, default 0.1
        Share of the observed entries hidden per repeat (held-out).
    n_repeats : int, default 2
    patience : int or None, default 2
        Stop after this many successive K that do not improve the best score by ``min_gain``
        (None: try the whole grid).
    min_gain : float, optional
        The smallest K whose score is within ``min_gain`` of the best is chosen. Default 0.02 nats
        per hidden entry for ``"heldout"`` (a 2 % gain in predictive density is not worth more
        components: on three well-separated clusters, K = 4-6 scored 0.005-0.017 better than K = 3
        by fitting the scored rows' own quirks), 0 for ``"bic"`` (it has its own penalty).
    random_state : int or None
        Seed of the masks (the fits use the estimator's own ``random_state``).

    Returns
    -------
    KSelection

    Raises
    ------
    BadInputError
        Bad arguments, or no K of the grid could be fitted (the errors are quoted).
    """
    if criterion not in CRITERIA:
        raise BadInputError(f"criterion must be one of {CRITERIA}, got {criterion!r}.")
    if criterion == "dpgmm":
        return _dpgmm_components(estimator, X, grid)
    if min_gain is None:
        min_gain = 0.02 if criterion == "heldout" else 0.0
    if not (isinstance(min_gain, (int, float)) and np.isfinite(min_gain) and min_gain >= 0):
        raise BadInputError(f"min_gain must be a non-negative number, got {min_gain!r}.")
    if not (isinstance(rate, (int, float)) and 0 < rate < 1):
        raise BadInputError(f"rate must be a number in (0, 1), got {rate!r}.")
    if not isinstance(n_repeats, (int, np.integer)) or n_repeats < 1:
        raise BadInputError(f"n_repeats must be a positive integer, got {n_repeats!r}.")
    arr = _as_matrix(X)
    n, D = arr.shape
    grid = default_grid(n, D) if grid is None else tuple(grid)
    if not grid or any(not isinstance(k, (int, np.integer)) or k < 1 for k in grid) or list(grid) != sorted(set(grid)):
        raise BadInputError(f"grid must be increasing positive integers, got {grid!r}.")
    # candidates report nothing, and skip what only the final fit needs (the factor imputers' bootstrap refits)
    quiet = {"callback": None, "progress": False, **getattr(estimator, "_selection_params", {})}
    base = clone(estimator).set_params(**{k: v for k, v in quiet.items() if k in estimator.get_params()})
    masks = _heldout_masks(arr, rate, n_repeats, random_state, "select_n_components") if criterion == "heldout" else []
    table, errors, best, stale = [], [], np.inf, 0
    for K in grid:
        est = clone(base).set_params(n_components=int(K))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # collapse / convergence warnings of candidate fits
                if criterion == "heldout":
                    per = []
                    for Xh, hidden in masks:
                        cond = clone(est).fit(Xh).conditional(Xh)
                        lp = entry_logpdf(cond, arr, hidden)
                        per.append(float(-np.mean(lp)))
                    score = float(np.mean(per))
                else:
                    fitted = est.fit(arr)
                    ll = float(np.sum(fitted.score_samples(arr)))
                    score = -2.0 * ll + _n_parameters(fitted, D) * np.log(n)
                    per = []
        except (BadInputError, ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
            errors.append(f"K={K}: {exc}")
            break  # a larger K will not fit either
        if not np.isfinite(score):
            errors.append(f"K={K}: non-finite score")
            break
        table.append({"n_components": int(K), "score": score, "per_repeat": tuple(per)})
        if score < best - min_gain or (min_gain == 0 and score < best):
            stale = 0
        else:
            stale += 1
        best = min(best, score)
        if patience is not None and stale >= patience:
            break
    if not table:
        raise BadInputError("select_n_components: no K could be fitted: " + "; ".join(errors))
    best = min(r["score"] for r in table)
    chosen = next(r["n_components"] for r in table if r["score"] <= best + min_gain)
    return KSelection(n_components=chosen, criterion=criterion, table=tuple(table), rate=float(rate),
                      n_repeats=len(masks) if criterion == "heldout" else 0, min_gain=float(min_gain))


def _heldout_masks(arr, rate, n_repeats, random_state, caller: str) -> list:
    """``n_repeats`` draws of ``(X with the hidden entries removed, hidden)``, ``rate`` of the observed entries hidden
    completely at random (:func:`explorer.evaluation.hide_observed`); a draw that would empty a column, or hides
    nothing, is left out. Raises BadInputError (naming ``caller``) when none is left."""
    rng = np.random.default_rng(random_state)
    masks = []
    for _ in range(n_repeats):
        try:
            Xh, hidden, _ = hide_observed(arr, "mcar", rate, random_state=rng)
        except BadInputError:  # the mask would empty a column
            continue
        if hidden.any():
            masks.append((Xh, hidden))
    if not masks:
        raise BadInputError(f"{caller}: too few observed entries to hide any for scoring.")
    return masks


def fit_auto(estimator, X, values=None):
    """Fit ``estimator`` (``n_components="auto"``) with the K :func:`select_n_components` picks by its rule.

    The estimator's ``_auto_criterion`` names the rule (``"dpgmm"`` for
    :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`, ``"heldout"`` for
    :class:`~explorer.impute.factor.MFAImputer`); an int ``random_state`` seeds the selection (else 0). The
    chosen K is used for this fit only (``n_components`` stays ``"auto"``, so ``clone`` and refits select
    again) and the selection is stored as ``selection_``. ``values``: ``X`` already validated as a float
    matrix with NaN (nullable and numeric-text columns converted), which the selection then uses.
    """
    seed = estimator.random_state if isinstance(estimator.random_state, (int, np.integer)) else 0
    arr = _as_matrix(X) if values is None else values
    selection = select_n_components(estimator, arr, criterion=estimator._auto_criterion, random_state=seed)
    K = selection.n_components
    refits = []
    # the posterior draws (the data-augmentation chain, or the factor models' bootstrap) wait until K is final:
    # a fit that collapses is refitted with fewer components, and its draws would be thrown away
    estimator._defer_posterior = True
    try:
        while True:
            estimator._auto_k = K
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    estimator.fit(X)
            finally:
                del estimator._auto_k
            collapsed = [w for w in caught if issubclass(w.category, ComponentCollapseWarning)]
            if not collapsed or K == 1 or getattr(estimator, "stop_reason_", None) == "interrupted":
                break  # (an interrupted fit is kept as it is: Ctrl-C means stop, not refit)
            # the rule must not choose components the fit then warns about: fewer, until none collapses
            n_rows = int((~np.isnan(arr)).any(axis=1).sum())
            small = int(np.sum(np.asarray(estimator.weights_) * n_rows < np.asarray(estimator.means_).shape[1]))
            refits.append(K)
            K = max(1, K - max(1, small))
    finally:
        del estimator._defer_posterior
        deferred = estimator.__dict__.pop("_deferred_posterior", None)
    if deferred is not None:  # the last fit's data and generator: the draws a fit at this K makes
        estimator._auto_k = K
        try:
            with warnings.catch_warnings(record=True) as drawn:
                warnings.simplefilter("always")
                estimator._fit_posterior(*deferred)
        finally:
            del estimator._auto_k
        caught = list(caught) + list(drawn)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if refits:
        selection = replace(selection, n_components=K,
                            table=selection.table + ({"n_components": K, "score": float("nan"), "per_repeat": (),
                                                      "collapsed_at": tuple(refits)},))
    estimator.selection_ = selection
    return estimator


# ---------------------------------------------------------------------------------------------- the prior's shrinkage
#: ``prior_shrinkage="auto"`` chooses the shrinkage on held-out entries only when the rule's own value is at least this
#: (below it the prior is near the data covariance whatever the shrinkage: N > 19 D rows)
SHRINKAGE_MIN_RULE = 0.05
#: ... and the table has at most this many entries (rows x columns): the choice costs about eight fits of the data
SHRINKAGE_MAX_ENTRIES = 20_000
#: the multipliers of the rule's shrinkage that :func:`select_shrinkage` may reach (powers of two)
SHRINKAGE_EXPONENTS = (-4, -3, -2, -1, 0, 1, 2)


@dataclass(frozen=True)
class ShrinkageSelection:
    """The outcome of :func:`select_shrinkage`.

    ``shrinkage``: the chosen :math:`\\lambda`; ``rule``: :math:`D / (N + D)`; ``table``: one dict per value tried
    (``shrinkage``, ``multiplier`` of the rule, ``score`` = mean held-out negative log-density per entry,
    ``per_repeat``), in the order tried; ``n_components``: the K of the candidate fits; ``rate``, ``n_repeats`` as
    used.
    """

    shrinkage: float
    rule: float
    table: tuple
    n_components: int
    rate: float
    n_repeats: int

    def to_frame(self):
        """The table as a pandas DataFrame (one row per shrinkage tried)."""
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in row.items() if k != "per_repeat"} for row in self.table])


def shrinkage_selected(n_rows: int, n_features: int) -> bool:
    """Whether ``prior_shrinkage="auto"`` chooses the shrinkage on held-out entries for a table of ``n_rows`` fitted
    rows and ``n_features`` columns: the rule :math:`D / (N + D)` is at least :data:`SHRINKAGE_MIN_RULE` and the
    table has at most :data:`SHRINKAGE_MAX_ENTRIES` entries."""
    from explorer.core.mixtures.prior import shrinkage_rule

    return (n_rows > 0 and shrinkage_rule(n_features, n_rows) >= SHRINKAGE_MIN_RULE
            and n_rows * n_features <= SHRINKAGE_MAX_ENTRIES)


def select_shrinkage(estimator, X, *, rate=0.2, n_repeats=2, random_state=0) -> ShrinkageSelection:
    r"""Choose the prior's shrinkage towards the diagonal for ``estimator`` (a
    :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer` with a fixed K) on the incomplete data ``X``.

    The default prior's covariance mode is the data covariance shrunk towards its diagonal by :math:`\lambda`
    (:func:`explorer.core.mixtures.prior.default_scale`). The rule :math:`\lambda_0 = D / (N + D)` repairs the low
    small eigenvalues of a covariance estimated from few rows, but one size does not fit all data: on strongly
    correlated columns (breast cancer) it throws away correlations the data support and the intervals over-cover
    (0.99 at 50-100 rows), on weakly correlated ones (Ionosphere) it is if anything too little
    (``results/coverage_prior.md``). This chooses :math:`\lambda` as the held-out rule of
    :func:`select_n_components` chooses K: for each of ``n_repeats`` masks a share ``rate`` of the observed entries is
    hidden (:func:`explorer.evaluation.hide_observed`), the imputer is fitted on the rest and the hidden entries are
    scored by their Student-t posterior predictive log-density (:func:`explorer.evaluation.entry_logpdf`). The
    candidates are :math:`\lambda_0 \cdot 2^j` (capped at 1) for :math:`j = -4, \dots, 2`; the search starts at the
    rule, tries both neighbours and walks towards the better one while the score improves (about four values, so
    about eight fits). The rule is kept unless another value scores lower.

    Parameters
    ----------
    estimator : GaussianMixtureImputer with an int ``n_components``; cloned, never fitted itself.
    X : array-like (n_samples, n_features), NaN = missing.
    rate : float, default 0.2
    n_repeats : int, default 2
    random_state : int or None
        Seed of the masks (the fits use the estimator's own ``random_state``).

    Returns
    -------
    ShrinkageSelection

    Raises
    ------
    BadInputError
        Bad arguments, or too few observed entries to hide any.
    """
    from explorer.core.mixtures import em_gmm
    from explorer.core.mixtures.prior import NIWPrior, default_scale, shrinkage_rule

    if not (isinstance(rate, (int, float)) and 0 < rate < 1):
        raise BadInputError(f"rate must be a number in (0, 1), got {rate!r}.")
    if not isinstance(n_repeats, (int, np.integer)) or isinstance(n_repeats, bool) or n_repeats < 1:
        raise BadInputError(f"n_repeats must be a positive integer, got {n_repeats!r}.")
    arr = _as_matrix(X)
    n_rows = int((~np.isnan(arr)).any(axis=1).sum())
    rule = shrinkage_rule(arr.shape[1], n_rows)
    quiet = {"callback": None, "progress": False, "predictive": "student_t", "n_components": estimator._n_components(),
             "prior_shrinkage": "rule"}
    base = clone(estimator).set_params(**quiet)
    masks = _heldout_masks(arr, rate, n_repeats, random_state, "select_shrinkage")
    # the data moments behind the prior do not depend on the shrinkage: one moment fit per mask, and every candidate
    # gets its prior's mean and scale as the fit with prior_shrinkage=lambda would make them (a test checks this)
    config = base._config()
    K, moments = config.n_components, []
    for Xh, _ in masks:
        data = em_gmm.prepare(Xh)
        moments.append((data.n_fit, *em_gmm.data_moments(data, config)))
    scores: dict[int, dict] = {}

    def score(j: int) -> float:
        if j not in scores:
            lam = min(1.0, rule * 2.0 ** j)
            per = []
            for (Xh, hidden), (n_fit, mean, cov) in zip(masks, moments):
                D = mean.shape[0]
                scale = default_scale(cov, K, float(D + 2), "full", "auto", n_fit, shrinkage=lam)
                prior = NIWPrior(mean=mean, scale=scale, shrinkage=lam)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # collapse / convergence warnings of candidate fits
                        cond = clone(base).set_params(prior=prior).fit(Xh).conditional(Xh)
                        per.append(float(-np.mean(entry_logpdf(cond, arr, hidden))))
                except (BadInputError, ArithmeticError, ValueError, np.linalg.LinAlgError):
                    per.append(np.inf)
            value = float(np.mean(per))
            scores[j] = {"shrinkage": lam, "multiplier": 2.0 ** j, "score": value if np.isfinite(value) else np.inf,
                         "per_repeat": tuple(per)}
        return scores[j]["score"]

    lo, hi = SHRINKAGE_EXPONENTS[0], SHRINKAGE_EXPONENTS[-1]
    while rule * 2.0 ** (hi - 1) >= 1.0:  # multipliers past lambda = 1 all give lambda = 1 (the rule is < 1: hi >= 1)
        hi -= 1
    best = min((0, -1, 1), key=score)  # the rule first: it is kept on ties
    direction = best
    while best and lo <= best + direction <= hi and score(best + direction) < score(best):
        best += direction
    if not np.isfinite(score(best)):
        best = 0  # nothing could be scored: the rule
    table = tuple(scores[j] for j in scores)
    return ShrinkageSelection(shrinkage=scores[best]["shrinkage"], rule=rule, table=table, n_components=int(K),
                              rate=float(rate), n_repeats=len(masks))
