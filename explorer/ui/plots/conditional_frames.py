"""Pure pieces of the conditional-density page (:mod:`explorer.ui.pages.conditional`).

Parsing a typed row, the 1-D and 2-D slices of :math:`p(x^m \\mid x^o)` (grids, densities,
highest-mass levels, samples, intervals), the level probabilities of a missing categorical cell of a mixed
table and the table under its plots (:func:`level_bars`, :func:`level_text`, :func:`mixed_row_table`), the
placeholder frames shown without a model, and the
colours of the page's figures (:mod:`explorer.ui.plots.density_slices` draws the frames).
No Panel import: everything here is a function of its arguments.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.core.validation import BadInputError
from explorer.ui.text import md

MISSING_TOKENS = ("", "?", "nan", "na", "n/a")
NONE = "(none: 1-D slice)"
PRIOR, POSTERIOR = "π_k (prior)", "h_k (this row)"
CURVE, MEAN, BAND, TRUTH, SAMPLE = "#1d2b3f", "#2f6fb3", "#9cc3e6", "#d62728", "#555555"
COMPONENT = "#7a5195"


# ----------------------------------------------------------------------------- pure helpers
def parse_row(text: str, columns) -> np.ndarray:
    """Parse a typed row: comma-separated numbers, blank or ``?`` (or nan/NA) = missing.

    Parameters
    ----------
    text : str
        E.g. ``"5.1, ?, 1.4, "`` for 4 columns.
    columns : sequence of str
        The data's column names (their number is the number of values expected).

    Returns
    -------
    ndarray of shape (n_features,)
        NaN at the missing entries.

    Raises
    ------
    BadInputError
        Wrong number of values, a value that is not a finite number, or nothing missing.
    """
    columns = list(columns)
    if not text or not text.strip():
        raise BadInputError(f"Type {len(columns)} values separated by commas ({', '.join(columns)}); "
                            "leave a value blank or type ? where it is missing.")
    tokens = [t.strip() for t in text.split(",")]
    if len(tokens) != len(columns):
        raise BadInputError(f"Expected {len(columns)} comma-separated values ({', '.join(columns)}), got "
                            f"{len(tokens)}. Leave a value blank or type ? for a missing one.")
    out = np.empty(len(columns))
    for j, tok in enumerate(tokens):
        if tok.lower() in MISSING_TOKENS:
            out[j] = np.nan
            continue
        try:
            out[j] = float(tok)
        except ValueError:
            raise BadInputError(f"Value {j + 1} ({columns[j]}) is {tok!r}, which is not a number. "
                                "Use ? or leave it blank for a missing value.") from None
        if not np.isfinite(out[j]):
            raise BadInputError(f"Value {j + 1} ({columns[j]}) is {tok!r}; give a finite number, "
                                "or ? for a missing value.")
    if not np.isnan(out).any():
        raise BadInputError("Nothing is missing in this row: leave at least one value blank or type ? "
                            "to see its conditional density.")
    return out


def _ranges(cm, row: int, features, extras, mass: float = 0.998, pad: float = 0.1):
    """Plot ranges of missing ``features`` of ``row``: the central ``mass`` of each marginal, padded.

    Quantiles of the mixture rather than "k sd of every component": a light component with a
    wide (e.g. Student-t) spread would otherwise stretch the axis far beyond where the mass is.
    """
    lower, upper = cm.interval(mass)
    out = []
    for f, t in zip(features, extras):
        lo, hi = float(lower[row, f]), float(upper[row, f])
        if t is not None and np.isfinite(t):
            lo, hi = min(lo, float(t)), max(hi, float(t))
        margin = pad * (hi - lo) if hi > lo else 1.0
        out.append((lo - margin, hi + margin))
    return out


def slice_1d(cm, row: int, feature: int, *, rng, truth=None, n_grid: int = 400, n_draws: int = 200,
             level: float = 0.95) -> dict:
    """Everything the 1-D view draws for one missing feature of one row.

    Parameters
    ----------
    cm : ConditionalMixture or StudentTConditionalMixture
    row, feature : int
        ``feature`` must be missing in ``row``.
    rng : numpy.random.Generator
        For the samples.
    truth : float, optional
        The true value (kept in the x range).

    Returns
    -------
    dict
        ``grid`` (G,), ``density`` (G,) = ``cm.marginal_pdf(row, feature, grid)[0]``,
        ``components`` (K, G), ``mean``, ``sd``, ``lower``, ``upper`` (the equal-tailed
        ``level`` interval), ``samples`` (n_draws,), ``truth`` (or None) and
        ``truth_density`` (density at the truth, 0 without one).
    """
    (lo, hi), = _ranges(cm, row, [feature], [truth])
    grid = np.linspace(lo, hi, n_grid)
    density, components = cm.marginal_pdf(row, feature, grid)
    lower, upper = cm.interval(level)
    samples = cm.sample(n_draws, rng)[:, row, feature]
    out = {"grid": grid, "density": density, "components": components,
           "mean": float(cm.mean()[row, feature]), "sd": float(np.sqrt(cm.variance()[row, feature])),
           "lower": float(lower[row, feature]), "upper": float(upper[row, feature]), "samples": samples,
           "truth": None if truth is None else float(truth), "truth_density": 0.0}
    if truth is not None:
        out["truth_density"] = float(cm.marginal_pdf(row, feature, [truth])[0][0])
    return out


def mass_levels(density, cell_area: float, masses=(0.5, 0.8, 0.95)) -> np.ndarray:
    """Density thresholds whose super-level sets hold the given probability masses (increasing).

    The mass of ``{x : p(x) >= t}`` is estimated on the grid (renormalised to the grid total).
    """
    d = np.sort(np.asarray(density, dtype=float).ravel())[::-1]
    cum = np.cumsum(d) * cell_area
    total = cum[-1] if cum[-1] > 0 else 1.0
    idx = np.minimum(np.searchsorted(cum / total, masses), d.size - 1)
    levels = np.unique(d[idx])
    return levels[levels > 0]


def slice_2d(cm, row: int, f1: int, f2: int, *, rng, truth=None, n_grid: int = 80, n_draws: int = 300) -> dict:
    """The 2-D view of two missing features: joint density on a grid, samples, mean, truth.

    Returns
    -------
    dict
        ``gx`` (Gx,), ``gy`` (Gy,), ``density`` (Gy, Gx) = ``cm.marginal_pdf_2d(row, f1, f2, gx, gy)[0]``,
        ``levels`` (:func:`mass_levels` for 50/80/95 %), ``samples`` (n_draws, 2), ``mean`` (2,),
        ``truth`` ((2,) or None).
    """
    ranges = _ranges(cm, row, [f1, f2], [None, None] if truth is None else list(truth))
    gx, gy = np.linspace(*ranges[0], n_grid), np.linspace(*ranges[1], n_grid)
    density = cm.marginal_pdf_2d(row, f1, f2, gx, gy)[0]
    draws = cm.sample(n_draws, rng)[:, row]
    mean = cm.mean()[row]
    return {"gx": gx, "gy": gy, "density": density,
            "levels": mass_levels(density, (gx[1] - gx[0]) * (gy[1] - gy[0])),
            "samples": draws[:, [f1, f2]], "mean": mean[[f1, f2]],
            "truth": None if truth is None else np.asarray(truth, dtype=float)}


# ----------------------------------------------------------------------------- a categorical cell
def level_bars(levels, proba, truth=None) -> dict:
    """What the bars of a missing categorical cell show: :math:`P(\\text{level} \\mid \\text{observed})`.

    Parameters
    ----------
    levels : sequence
        The column's levels (shown as text).
    proba : array of shape (n_levels,)
        Their probabilities given the observed part of the row (they sum to one).
    truth : level, optional
        The true level, when known (a cell hidden by the page).

    Returns
    -------
    dict
        ``levels`` (list of str), ``proba`` (V,), ``best`` (the index of the most probable level) and ``truth``
        (the index of the true level, or None).
    """
    levels = [str(v) for v in levels]
    proba = np.asarray(proba, dtype=float)
    if proba.shape != (len(levels),):
        raise ValueError(f"{len(levels)} levels but {proba.shape} probabilities")
    truth = None if truth is None or str(truth) not in levels else levels.index(str(truth))
    return {"levels": levels, "proba": proba, "best": int(np.argmax(proba)) if len(levels) else None,
            "truth": truth}


def level_text(column: str, frame: dict, max_levels: int = 8) -> str:
    """One line of Markdown with the probabilities of :func:`level_bars`' ``frame``, most probable first (at most
    ``max_levels``), the most probable in bold, and the true level; user strings (the column, the levels) escaped."""
    order = np.argsort(-frame["proba"], kind="stable")
    shown = [f"{md(frame['levels'][i])} {frame['proba'][i]:.3f}" for i in order[:max_levels]]
    if shown:
        shown[0] = f"**{shown[0]}**"
    rest = len(order) - len(shown)
    text = f"P({md(column)} | observed): " + " · ".join(shown) + (f" · … {rest} more" if rest > 0 else "")
    truth = frame["truth"]
    if truth is not None:
        text += f" — true level: {md(frame['levels'][truth])} (P = {frame['proba'][truth]:.3f})"
    return text


def mixed_row_table(fit, cm, values, complete, hidden, categorical, row: int) -> pd.DataFrame:
    """The table under the plots for row ``row`` of a mixed table: one line per column with the observed value, or
    the imputation (conditional mean / most probable level), the sd and 95 % interval of a number, the
    probabilities of a category's levels (most probable first) and the true value of a hidden cell.

    ``fit`` is a :class:`~explorer.ui.state.em_model.LocationFit`, ``cm`` the row's numeric conditional (one row;
    None without numeric columns), ``values`` / ``complete`` the row with its gaps / as loaded (pandas Series),
    ``hidden`` which of its cells were hidden at random. User strings stay as they are: the DataFrame pane escapes
    every cell.
    """
    numeric = [str(c) for c in fit.imputer.numeric_columns_]
    if cm is not None:
        mean, sd = cm.mean()[0], np.sqrt(cm.variance()[0])
        lower, upper = cm.interval(0.95)
    rows = []
    for j, (c, v) in enumerate(values.items()):
        c = str(c)
        missing = pd.isna(v)
        line = {"feature": c, "observed": "" if missing else (str(v) if c in categorical else f"{v:.4g}"),
                "imputed": "", "sd": "", "95% interval": "", "P(level | observed)": "", "truth": ""}
        if missing and c in categorical:
            levels, proba = fit.levels[c], fit.proba[c][row]
            order = np.argsort(-proba, kind="stable")
            line["imputed"] = levels[order[0]]
            line["P(level | observed)"] = ", ".join(f"{levels[i]} {proba[i]:.2f}" for i in order[:4]) + (
                ", …" if len(order) > 4 else "")
        elif missing and cm is not None:
            f = numeric.index(c)
            line.update({"imputed": f"{mean[f]:.4g}", "sd": f"{sd[f]:.3g}",
                         "95% interval": f"[{lower[0, f]:.3g}, {upper[0, f]:.3g}]"})
        if missing and hidden[j]:
            t = complete.iloc[j]
            line["truth"] = str(t) if c in categorical else f"{t:.4g}"
        rows.append(line)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- placeholder frames
def placeholder_weights(title: str = "Component weights (no model)") -> dict:
    """No bars (no fitted model): the previous data set's weights must not stay on screen."""
    return {"prior": np.zeros(0), "posterior": np.zeros(0), "title": title}


def placeholder_1d(message: str) -> dict:
    grid = np.linspace(0.0, 1.0, 2)
    return {"slice": {"grid": grid, "density": np.zeros(2), "components": np.zeros((1, 2)), "mean": 0.5,
                      "sd": 0.0, "lower": 0.5, "upper": 0.5, "samples": np.zeros(0), "truth": None,
                      "truth_density": 0.0}, "xlabel": "x", "title": message}
