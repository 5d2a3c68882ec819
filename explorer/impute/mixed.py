r"""Impute a table with numeric and categorical columns: the location model, as a scikit-learn estimator.

:class:`MixedMixtureImputer` takes a pandas DataFrame as it is: numeric columns (float, int, nullable int) are the
Gaussian block, and pandas categorical, string, object and boolean columns are categorical columns. Each
component of the mixture holds a Gaussian over the numeric columns and one categorical distribution per
categorical column (:mod:`explorer.core.mixtures.location_model`, fitted by MAP-EM with missing entries
anywhere; Ghahramani & Jordan 1994 treat real and discrete features in one mixture).

* ``transform``: numeric gaps get :math:`E[x^m \mid \text{observed}]` and a missing category its most probable
  level; observed cells come back unchanged and every column keeps its dtype (categories keep their levels).
* ``predict_proba``: per categorical column, a DataFrame of level probabilities for every row (for a missing
  cell the predictive given the rest of the row; for an observed one what the model would say had it been hidden),
  averaged over the posterior draws of the parameters.
* ``sample``: proper multiple imputation: joint draws of every missing cell, numeric and categorical, as a list of
  DataFrames; imputation i is drawn at the i-th of ``n_posterior_draws`` draws of the parameters from their
  posterior (Bayesian data augmentation, :mod:`explorer.core.mixtures.location_augmentation`), so the imputations
  carry the uncertainty of the parameters, as Rubin's rules need.
* ``conditional``: the numeric block's per-row conditional mixture (means, 95 % intervals, densities), pooled over
  the posterior draws.

A level met only in new rows cannot be predicted and is refused by name; a column of more than ``max_levels``
distinct values is refused as an identifier or free text, and one with a different value in each of its observed
rows (at least ``IDENTIFIER_MIN_ROWS``) is fitted with an :class:`IdentifierWarning` that names it.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.mixtures import location_augmentation as la
from explorer.core.mixtures import location_model as lm
from explorer.core.validation import BadInputError, check_int
from explorer.utils.random_state import check_random_state

__all__ = ["MixedMixtureImputer", "IdentifierWarning", "IDENTIFIER_MIN_ROWS", "categorical_columns"]

#: A categorical column with a different value in each of at least this many observed rows gets an
#: :class:`IdentifierWarning` (the rule by which a CSV's first column becomes row names, ``explorer.io``).
IDENTIFIER_MIN_ROWS = 20


class IdentifierWarning(UserWarning):
    """A categorical column has a different value in every observed row: an identifier (a name, a code), which
    tells nothing about the other columns and whose missing cells cannot be imputed; leave it out."""

_PREDICTIVE = ("auto", "draws", "plugin")
#: The data-augmentation chain behind predictive="draws", as GaussianMixtureImputer's (DA_BURN, DA_THIN there: this
#: module cannot import it, explorer.model_selection imports explorer.evaluation, which imports this module): it
#: starts at the MAP fit, so a short burn-in; one state kept every few sweeps.
DA_BURN, DA_THIN = 10, 3


def categorical_columns(df: pd.DataFrame) -> list[str]:
    """The columns of ``df`` that :class:`MixedMixtureImputer` treats as categorical: categorical, string, object
    and boolean dtypes (numbers, nullable integers included, are numeric)."""
    out = []
    for name in df.columns:
        dtype = df[name].dtype
        if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(dtype) \
                or pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
            out.append(name)
    return out


def _levels_of(series: pd.Series) -> list:
    if isinstance(series.dtype, pd.CategoricalDtype):
        return list(series.cat.categories)
    values = series.dropna().unique().tolist()
    try:
        return sorted(values)
    except TypeError:  # mixed types in an object column: sort by their text
        return sorted(values, key=str)


class MixedMixtureImputer(TransformerMixin, BaseEstimator):
    """Impute numeric and categorical columns together with a mixture of location models.

    Parameters
    ----------
    n_components : int or "auto", default "auto"
        Number of mixture components K. ``"auto"`` chooses K on the data by held-out cells
        (:func:`explorer.core.mixtures.location_model.select_components`): two masks each hide 10 % of the observed
        cells (numbers and levels), every K = 1 .. min(8, n_rows // (D + 1)) (D the number of columns) is fitted on
        the masked tables and scored by the log predictive of the hidden cells given the rest of their row; the
        smallest K within one standard error of the best score is then fitted on all the data exactly as
        ``n_components=K`` with the same ``random_state`` fits it. A K whose fit leaves a component fewer expected
        rows than there are numeric columns is never chosen. The table is ``selection_``. The default since the
        measurement in ``results/mixed_data.md`` (MCAR 20 %, 5 seeds, 8 data sets) against K = 2, the former
        default: on penguins NRMSE 0.635 -> 0.580, PFC 0.329 -> 0.224 and NLL 0.835 -> 0.730 (K = 4-7 chosen);
        lower PFC and NLL on auto_mpg and abalone too, but abalone's NRMSE 2 % higher (0.330 -> 0.337); on msleep
        one seed chose K = 1 (NLL 0.182 -> 0.248); within 0.005 on the numeric sets and hepatitis. It took 3.0 to
        11.0 times as long as one K = 2 fit (0.7-4.7 s per table there). BIC (the earlier rule) is
        ``select_components(criterion="bic")``; it chose K = 1 on msleep and wine. Give an int for a fixed K.
    covariance_type : {"full", "diag"}, default "full"
        Of the numeric block.
    reg_covar : float, default 1e-6
    prior : "auto", "fraley-raftery", None or NIWPrior, default "auto"
        Prior of the numeric block, as :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`.
    alpha : float, default 1.0
        Symmetric Dirichlet parameter of the weights (1: maximum likelihood).
    phi : float or None, default None
        Symmetric Dirichlet parameter of the level probabilities; None: :math:`1 + 1/V_j` per column (one
        pseudo-observation per component and column).
    tol : float, default 1e-5
    max_iter : int, default 300
    n_init : int, default 1
    init : {"kmeans", "random"}, default "kmeans"
    max_levels : int, default 100
        A categorical column with more distinct values is refused (an identifier or free text).
    predictive : {"auto", "draws", "plugin"}, default "auto"
        What ``sample``, :meth:`conditional` and :meth:`predict_proba` draw from. ``"draws"``: proper multiple
        imputation. After the MAP fit, Bayesian data augmentation (Tanner & Wong 1987) alternates draws of the
        labels and the gaps (numbers and levels) at the parameters and draws of the parameters from their conjugate
        posterior (weights and level tables from Dirichlets, the numeric block from its Normal-inverse-Wishart;
        :mod:`explorer.core.mixtures.location_augmentation`: start at the MAP fit, 10 sweeps of burn-in, one state
        kept every 3 sweeps) and keeps ``n_posterior_draws`` parameter draws. ``sample``'s imputation i is drawn at
        draw ``i % n_posterior_draws`` (labels, levels and numbers; every row of one imputation shares its
        parameters, as Rubin's rules assume); :meth:`conditional` is the mixture over the draws' components, each
        draw's per-row responsibilities (which include the observed categories) divided by their number, so its
        intervals are the pooled posterior predictive ones; :meth:`predict_proba` is the average of the draws'
        level probabilities (the posterior predictive). Chosen over a bootstrap because the conjugate priors make
        every step an exact draw, with no refit per draw. It needs a prior on the numeric block (not
        ``prior=None``) when there are numeric columns. ``"plugin"``: everything at the MAP fit's parameters (the
        draws then carry no parameter uncertainty and the intervals are narrower, most on small tables).
        ``"auto"``: ``"draws"`` when the numeric block has a prior or there is no numeric column, else
        ``"plugin"``. ``transform`` and ``score_samples`` do not depend on it: they use the MAP fit.
    n_posterior_draws : int, default 20
        The parameter draws kept by ``predictive="draws"`` (the chain runs 10 + 3 x n_posterior_draws sweeps in
        ``fit``).
    random_state : int, Generator or None, default None

    Attributes
    ----------
    numeric_columns_, categorical_columns_ : list
        The columns of each kind, in the order of the data.
    categories_ : dict
        Categorical column -> list of its levels (the codes of the model are positions in it).
    weights_, means_, covariances_ : ndarray
        The mixture's weights and its numeric block.
    probs_ : dict
        Categorical column -> (n_components, V_j) level probabilities per component.
    predictive_ : {"draws", "plugin"}
        The predictive used (``predictive`` with ``"auto"`` resolved).
    posterior_weights_, posterior_means_, posterior_covariances_ : ndarray
        With ``predictive_ == "draws"`` only: the parameter draws, (M, K), (M, K, D) and (M, K, D, D) or (M, K, D),
        M = ``n_posterior_draws``.
    posterior_probs_ : dict
        With ``predictive_ == "draws"`` only: categorical column -> (M, K, V_j) drawn level probabilities.
    positive_columns_ : ndarray of bool
        Per numeric column, whether its observed training values are all positive: :meth:`conditional`'s
        ``interval`` warns (``NegativeIntervalWarning``) when such a column's interval reaches below zero.
    n_iter_, converged_, objective_ : the fit's record.
    n_components_ : int
        The K fitted (the chosen one with ``n_components="auto"``).
    selection_ : DataFrame
        With ``n_components="auto"`` only: one row per K tried, with its ``heldout`` score (mean log predictive per
        hidden cell), ``log_likelihood`` (the chosen K's fit on all the data), ``n_parameters``, ``min_rows`` (the
        smallest expected component size of its fits) and ``refused`` (the guard). A table
        rather than the :class:`~explorer.model_selection.KSelection` of the Gaussian imputers:
        :mod:`explorer.model_selection` imports :mod:`explorer.evaluation`, which imports this module.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from explorer.impute.mixed import MixedMixtureImputer
    >>> rng = np.random.default_rng(0)
    >>> kind = rng.choice(["a", "b"], size=200)
    >>> df = pd.DataFrame({"kind": kind, "x": np.where(kind == "a", 0.0, 5.0) + rng.normal(size=200)})
    >>> df.loc[:19, "kind"] = None
    >>> out = MixedMixtureImputer(random_state=0).fit_transform(df)
    >>> bool(out["kind"].isna().any()), float((out.loc[:19, "kind"] == kind[:20]).mean()) > 0.9
    (False, True)
    """

    def __init__(self, n_components="auto", covariance_type="full", reg_covar=1e-6, prior="auto", alpha=1.0, phi=None,
                 tol=1e-5, max_iter=300, n_init=1, init="kmeans", max_levels=100, predictive="auto",
                 n_posterior_draws=20, random_state=None):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.prior = prior
        self.alpha = alpha
        self.phi = phi
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.init = init
        self.max_levels = max_levels
        self.predictive = predictive
        self.n_posterior_draws = n_posterior_draws
        self.random_state = random_state

    # ------------------------------------------------------------------ data
    @staticmethod
    def _frame(X) -> pd.DataFrame:
        if isinstance(X, pd.DataFrame):
            return X
        if hasattr(X, "toarray") or hasattr(X, "tocsr"):
            raise BadInputError("MixedMixtureImputer: sparse input is not supported; give a DataFrame or a 2-D array.")
        arr = np.asarray(X, dtype=object)
        if arr.ndim != 2:
            raise BadInputError(f"MixedMixtureImputer: X must be 2-D (a DataFrame); got shape {arr.shape}.")
        frame = pd.DataFrame(arr, columns=[f"x{j}" for j in range(arr.shape[1])])
        for c in frame.columns:  # an array: columns whose every cell is a number (or missing) are numeric
            num = pd.to_numeric(frame[c], errors="coerce")
            if (num.notna() | frame[c].isna()).all():
                frame[c] = num.astype(float)
        return frame

    def _split(self, df: pd.DataFrame, fitting: bool):
        """``(X_numeric, codes)`` of ``df`` in the model's columns (levels learned when ``fitting``)."""
        if fitting:
            if len(set(map(str, df.columns))) != df.shape[1]:
                raise BadInputError("MixedMixtureImputer: column names must be unique.")
            empty = [str(c) for c in df.columns if df[c].isna().all()]
            if empty:
                raise BadInputError(f"MixedMixtureImputer: column(s) {empty} have no observed value; drop them "
                                    "(nothing can be learned about them).")
            cats = categorical_columns(df)
            self.categorical_columns_ = list(cats)
            self.numeric_columns_ = [c for c in df.columns if c not in cats]
            self.feature_names_in_ = np.array([str(c) for c in df.columns], dtype=object)
            self.n_features_in_ = df.shape[1]
            levels = {}
            for c in cats:
                lv = _levels_of(df[c])
                if len(lv) > self.max_levels:
                    raise BadInputError(
                        f"MixedMixtureImputer: column {str(c)!r} has {len(lv)} distinct values, more than "
                        f"max_levels={self.max_levels}: it looks like an identifier or free text, not a category. "
                        "Drop it, or raise max_levels if it really is a category.")
                levels[c] = lv
                seen = df[c].dropna()
                if len(seen) >= IDENTIFIER_MIN_ROWS and seen.nunique() == len(seen):
                    warnings.warn(IdentifierWarning(
                        f"MixedMixtureImputer: column {str(c)!r} has a different value in each of its {len(seen)} "
                        "observed rows: an identifier tells nothing about the other columns, and its missing "
                        f"cells cannot be imputed. Leave it out (exclude=[{str(c)!r}] when reading the CSV, "
                        f"--exclude {str(c)!r} on the command line) or use it as the row index."), stacklevel=3)
            self.categories_ = levels
        else:
            names = [str(c) for c in df.columns]
            if names != list(self.feature_names_in_):
                raise BadInputError(f"MixedMixtureImputer: X has columns {names}, the model was fitted on "
                                    f"{list(self.feature_names_in_)}.")
        n = df.shape[0]
        num = np.empty((n, len(self.numeric_columns_)))
        for j, c in enumerate(self.numeric_columns_):
            col = pd.to_numeric(df[c], errors="coerce")
            bad = col.isna() & df[c].notna()
            if bad.any():
                raise BadInputError(f"MixedMixtureImputer: column {str(c)!r} was numeric when fitted but has "
                                    f"the value {df[c][bad].iloc[0]!r} (row {int(np.flatnonzero(bad)[0])}).")
            num[:, j] = col.to_numpy(dtype=float, na_value=np.nan)
        codes = np.full((n, len(self.categorical_columns_)), -1, dtype=np.int64)
        for j, c in enumerate(self.categorical_columns_):
            lv = self.categories_[c]
            index = {v: i for i, v in enumerate(lv)}
            col = df[c]
            present = col.notna().to_numpy()
            values = col[present].tolist()
            unknown = [v for v in values if v not in index]
            if unknown:
                raise BadInputError(
                    f"MixedMixtureImputer: column {str(c)!r} has the level {unknown[0]!r}, which the training rows "
                    f"never showed (levels: {lv[:10]}{' ...' if len(lv) > 10 else ''}); the model cannot predict it. "
                    "Refit with rows that have it, or map it to a known level or to missing.")
            codes[present, j] = [index[v] for v in values]
        return num, codes

    def _prepare(self, num, codes):
        return lm.prepare(num if num.shape[1] else None, codes if codes.shape[1] else None,
                          [len(self.categories_[c]) for c in self.categorical_columns_] or None,
                          numeric_columns=[str(c) for c in self.numeric_columns_],
                          categorical_columns=[str(c) for c in self.categorical_columns_],
                          max_levels=max(self.max_levels, 1))

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Fit by MAP-EM on the observed cells of ``X`` (a DataFrame; NaN / None / pd.NA = missing), then (with
        ``predictive_ == "draws"``) draw the parameters from their posterior."""
        if not (isinstance(self.max_levels, numbers.Integral) and self.max_levels >= 1):
            raise BadInputError(f"max_levels must be a positive integer, got {self.max_levels!r}.")
        if self.predictive not in _PREDICTIVE:
            raise BadInputError(f"predictive must be one of {_PREDICTIVE}, got {self.predictive!r}.")
        check_int("n_posterior_draws", self.n_posterior_draws, 1)
        auto = isinstance(self.n_components, str) and self.n_components == "auto"
        config = lm.LocationConfig(
            n_components=1 if auto else self.n_components, covariance_type=self.covariance_type,
            reg_covar=self.reg_covar, prior=self.prior, alpha=self.alpha, phi=self.phi, tol=self.tol,
            max_iter=self.max_iter, n_init=self.n_init, init=self.init)
        df = self._frame(X)
        if df.shape[0] < 2:
            raise BadInputError(f"MixedMixtureImputer: X has {df.shape[0]} row(s); at least 2 are needed.")
        num, codes = self._split(df, fitting=True)
        if self.predictive == "draws" and self.prior is None and num.shape[1]:
            raise BadInputError("predictive='draws' draws the parameters from their posterior: with numeric columns it "
                                "needs a prior on them (not prior=None).")
        data = self._prepare(num, codes)
        rng = check_random_state(self.random_state)
        if auto:
            # the masks and candidates draw from a generator of their own, so that the chosen K is fitted exactly as
            # MixedMixtureImputer(n_components=K, random_state=...) fits it
            result, rows = lm.select_components(data, config, check_random_state(self.random_state), refit_rng=rng)
            self.selection_ = pd.DataFrame(list(rows))
            self.selection_.attrs["criterion"] = "heldout"
        else:
            if hasattr(self, "selection_"):
                del self.selection_
            result = lm.fit(data, config, rng)
        state = result.state
        self._state = state
        self.weights_ = np.array(state.weights)
        self.means_ = np.array(state.means)
        self.covariances_ = np.array(state.covariances)
        self.probs_ = {c: np.array(p) for c, p in zip(self.categorical_columns_, state.probs)}
        self.n_iter_ = int(result.n_iter)
        self.converged_ = bool(result.converged)
        self.objective_ = float(state.objective)
        self.n_components_ = int(self.weights_.shape[0])
        with np.errstate(invalid="ignore"):  # numeric columns whose observed values are all positive (NaN: False)
            self.positive_columns_ = ~np.any(num <= 0, axis=0)
        self._fit_posterior(data, rng)
        return self

    def _fit_posterior(self, data, rng) -> None:
        """``predictive_``; with ``"draws"`` the data-augmentation chain from the fit, its draws ``posterior_*_``."""
        for name in ("posterior_weights_", "posterior_means_", "posterior_covariances_", "posterior_probs_",
                     "_draw_states"):
            self.__dict__.pop(name, None)
        if self.predictive == "auto":
            self.predictive_ = "draws" if self.prior is not None or not self.numeric_columns_ else "plugin"
        else:
            self.predictive_ = self.predictive
        if self.predictive_ != "draws":
            return
        state = self._state
        config = la.LocationDAConfig(n_burn=DA_BURN, n_thin=DA_THIN, alpha=self.alpha, phi=self.phi,
                                     covariance_type=self.covariance_type)
        start = la.init(data, state.weights, state.means, state.covariances, state.probs, config, rng)
        kept = la.run(start, data, state.prior, config, int(self.n_posterior_draws), rng)
        self.posterior_weights_ = np.stack([s.weights for s in kept])
        self.posterior_means_ = np.stack([s.means for s in kept])
        self.posterior_covariances_ = np.stack([s.covariances for s in kept])
        self.posterior_probs_ = {c: np.stack([s.probs[j] for s in kept])
                                 for j, c in enumerate(self.categorical_columns_)}
        # the draws as location-model states for the predictions, which read only the parameters (the other fields,
        # the E-step's record, stay the MAP fit's)
        self._draw_states = [replace(state, weights=s.weights, means=s.means, covariances=s.covariances,
                                     probs=s.probs) for s in kept]

    def _check_fitted(self):
        if not hasattr(self, "_state"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("This MixedMixtureImputer is not fitted yet: call fit first.")

    def _data(self, X):
        self._check_fitted()
        df = self._frame(X)
        return df, self._prepare(*self._split(df, fitting=False))

    def _frame_from(self, df: pd.DataFrame, num: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
        out = df.copy()
        for j, c in enumerate(self.numeric_columns_):
            miss = df[c].isna().to_numpy()
            if miss.any():
                col = out[c].astype(float) if not pd.api.types.is_float_dtype(out[c].dtype) else out[c]
                col = col.copy()
                col[miss] = num[miss, j]
                out[c] = col
        for j, c in enumerate(self.categorical_columns_):
            miss = df[c].isna().to_numpy()
            if miss.any():
                lv = self.categories_[c]
                filled = [lv[k] for k in codes[miss, j]]
                col = out[c].copy()
                if isinstance(col.dtype, pd.CategoricalDtype):
                    col[miss] = filled
                else:
                    col = col.astype(object)
                    col[miss] = filled
                    if pd.api.types.is_bool_dtype(df[c].dtype) or all(isinstance(v, (bool, np.bool_)) for v in lv):
                        col = col.astype(bool)
                out[c] = col
        return out

    # ------------------------------------------------------------------ use
    def transform(self, X):
        """Single imputation: numeric gaps by their conditional mean, missing categories by their most probable
        level. Returns a DataFrame with the columns, index and dtypes of ``X``; observed cells unchanged."""
        df, data = self._data(X)
        num, codes = lm.impute(self._state, data)
        return self._frame_from(df, num, codes)

    def _drawn(self) -> bool:
        return getattr(self, "predictive_", "plugin") == "draws"

    def predict_proba(self, X) -> dict:
        """Per categorical column, a DataFrame (rows of ``X`` x levels) of :math:`P(\\text{level} \\mid
        \\text{the rest of the row})`; rows sum to one. With ``predictive_ == "draws"`` the posterior predictive:
        the average over the parameter draws of each draw's level probabilities (so its most probable level may
        differ from ``transform``'s, the MAP fit's, where two levels are close)."""
        df, data = self._data(X)
        if self._drawn():
            per_draw = [lm.predict_proba(s, data) for s in self._draw_states]
            probs = [np.mean([d[j] for d in per_draw], axis=0) for j in range(len(self.categorical_columns_))]
        else:
            probs = lm.predict_proba(self._state, data)
        return {c: pd.DataFrame(p, index=df.index, columns=self.categories_[c])
                for c, p in zip(self.categorical_columns_, probs)}

    def sample(self, X, n_imputations=5, random_state=None) -> list[pd.DataFrame]:
        """``n_imputations`` joint draws of every missing cell (numeric and categorical), as DataFrames like
        :meth:`transform`'s. With ``predictive_ == "draws"`` imputation i is drawn at the parameter draw
        ``i % n_posterior_draws`` (proper multiple imputation), else at the MAP fit."""
        if not (isinstance(n_imputations, numbers.Integral) and n_imputations >= 1):
            raise BadInputError(f"n_imputations must be a positive integer, got {n_imputations!r}.")
        df, data = self._data(X)
        n, rng = int(n_imputations), check_random_state(random_state)
        if self._drawn():
            num = np.empty((n,) + data.X.shape)
            codes = np.empty((n,) + data.codes.shape, dtype=np.int64)
            M = len(self._draw_states)
            for m in range(min(M, n)):  # imputation i at parameter draw i % M: the rows share the draw
                which = np.arange(m, n, M)
                num[which], codes[which] = lm.sample(self._draw_states[m], data, which.size, rng)
        else:
            num, codes = lm.sample(self._state, data, n, rng)
        return [self._frame_from(df, num[s], codes[s]) for s in range(n)]

    def conditional(self, X) -> ConditionalMixture:
        """The numeric columns' per-row conditional mixture given every observed cell of the row
        (:class:`~explorer.core.gaussians.conditional.ConditionalMixture`: ``mean()``, ``interval(level)``,
        ``sample``), in the order of ``numeric_columns_``.

        With ``predictive_ == "draws"`` the mixture over the M x K components of the M parameter draws (component
        ``m * K + k``), each draw's per-row responsibilities (which include the observed categories) divided by M:
        the pooled posterior predictive. Else the mixture at the MAP fit. Its ``interval`` warns
        (``NegativeIntervalWarning``) when an interval of a column whose observed training values were all positive
        reaches below zero.
        """
        _, data = self._data(X)
        if not self._drawn() or data.n_numeric == 0:  # (no numeric column: the core's error)
            cm = lm.conditional_numeric(self._state, data)
        else:
            M, K = self.posterior_weights_.shape
            cm = ConditionalMixture.from_gaussian_mixture(
                data.X, self.posterior_weights_.ravel() / M, self.posterior_means_.reshape(M * K, -1),
                self.posterior_covariances_.reshape((M * K,) + self.posterior_covariances_.shape[2:]),
                covariance_type=self.covariance_type, columns=data.numeric_columns)
            weights = np.concatenate([lm.posterior(s, data) for s in self._draw_states], axis=1) / M
            weights.setflags(write=False)
            cm = replace(cm, weights=weights)
        positive = getattr(self, "positive_columns_", None)
        return cm if positive is None else replace(cm, positive=np.asarray(positive, dtype=bool))

    def score_samples(self, X) -> np.ndarray:
        """Per-row log-likelihood of the observed cells (densities of the numbers times probabilities of the
        levels)."""
        _, data = self._data(X)
        return lm.log_likelihood_rows(self._state, data)
