"""Frame builders and plot helpers of 2-D mixture scatter panels (EM and variational playgrounds).

Pure functions turn a fitted state and the data into plain arrays (:func:`panel_frame`,
:func:`ellipse_paths`); :class:`~explorer.ui.plots.figures.ScatterPanel` draws them. The HoloViews
helpers :func:`panel_overlay` and :func:`fit_axes` draw a frame as a HoloViews overlay (HoloViews is
imported when they are first used, not with this module).
"""

from __future__ import annotations

import numpy as np
from bokeh.palettes import Category10_10

from explorer.core.gaussians.conditional import ConditionalMixture
from explorer.core.mixtures import em_gmm

__all__ = ["COLORS", "TRACE_MIN_ITERATIONS", "axis_ranges", "ellipse_paths", "empty_frame", "fit_axes", "panel_frame",
           "panel_overlay"]

COLORS = {str(k + 1): Category10_10[k % 10] for k in range(30)} | {"mean": "black", "none": "#444444"}
_RUG = 0.05  # rug band: this fraction of the axis range, below / left of the data


def ellipse_paths(means, covariances, scale: float, n_points: int = 60) -> list[dict]:
    """Closed ellipse paths ``{x, y, comp}`` at ``scale`` standard deviations, one per component.

    Parameters
    ----------
    means : array of shape (K, 2)
    covariances : array of shape (K, 2, 2) (full) or (K, 2) (diagonal)
    scale : float
        Number of standard deviations (the path is the set ``(x-m)' S^-1 (x-m) = scale**2``).

    Returns
    -------
    list of K dicts with ``x``, ``y`` (arrays of shape (n_points,)) and ``comp`` ("1".."K").
    """
    means = np.asarray(means, dtype=float)
    covs = np.asarray(covariances, dtype=float)
    if covs.ndim == 2:
        covs = np.einsum("kd,de->kde", covs, np.eye(covs.shape[1]))
    t = np.linspace(0.0, 2.0 * np.pi, n_points)
    circle = np.stack([np.cos(t), np.sin(t)])  # (2, n)
    out = []
    for k, (m, S) in enumerate(zip(means, covs)):
        evals, evecs = np.linalg.eigh(0.5 * (S + S.T))
        pts = m[:, None] + scale * (evecs * np.sqrt(np.clip(evals, 0.0, None))) @ circle
        out.append({"x": pts[0], "y": pts[1], "comp": str(k + 1)})
    return out


def axis_ranges(values: np.ndarray) -> tuple[tuple, tuple]:
    """Axis ranges covering ``values`` (NaN ignored) with a margin and the rug band."""
    lo, hi = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    span = np.maximum(hi - lo, 1e-6)
    lo, hi = lo - (0.06 + _RUG) * span, hi + 0.06 * span
    return (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))


_POINT_COLUMNS = ("x", "y", "comp", "kind", "fill", "line", "size", "marker", "lw")
_POINT_STYLE = {  # kind: (fill alpha (None = responsibility), line alpha (None = resp.), size, marker, line width)
    "data": (None, 0.0, 6.0, "circle", 1.0),
    "imputed": (0.0, None, 7.0, "circle", 1.5),
    "mean": (0.0, 1.0, 14.0, "x", 3.0),
    "observed_mean": (1.0, 1.0, 12.0, "square", 1.0),
    "model_mean": (0.0, 1.0, 16.0, "square", 2.5),
}


def _points(kind: str, x, y, comp, resp=None) -> dict:
    """Rows of the single point element for one kind of mark (style columns filled in)."""
    n = len(x)
    fill, line, size, marker, lw = _POINT_STYLE[kind]
    resp = np.ones(n) if resp is None else resp
    return {"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float),
            "comp": np.broadcast_to(np.asarray(comp, dtype=object), (n,)).astype(object),
            "kind": np.full(n, kind, dtype=object),
            "fill": resp if fill is None else np.full(n, fill), "line": resp if line is None else np.full(n, line),
            "size": np.full(n, size), "marker": np.full(n, marker, dtype=object), "lw": np.full(n, lw)}


def _concat(parts: list[dict]) -> dict:
    return {c: np.concatenate([p[c] for p in parts]) for c in _POINT_COLUMNS}


def empty_frame(xlim=(0.0, 1.0), ylim=(0.0, 1.0), points=None) -> dict:
    """A frame with nothing but (optionally) plain clicked ``points`` of shape (n, 2)."""
    pts = np.empty((0, 2)) if points is None or len(points) == 0 else np.asarray(points, dtype=float)
    seg = {"x0": np.empty(0), "y0": np.empty(0), "x1": np.empty(0), "y1": np.empty(0),
           "comp": np.empty(0, dtype=object), "alpha": np.empty(0)}
    return {"points": _points("data", pts[:, 0], pts[:, 1], "none"), "marks": seg, "ellipses": [],
            "truth": [], "xlim": xlim, "ylim": ylim}


def panel_frame(state, data: em_gmm.EMData, covariance_type: str, variant: str, mode: str,
                xlim, ylim, truth_params: dict | None = None) -> dict:
    """Everything one panel draws for one EM state, as plain arrays (no NaN in drawn columns).

    Parameters
    ----------
    state : EMState
    data : EMData with 2 features (NaN at missing entries)
    covariance_type : {"full", "diag"}
    variant : {"em", "naive", "mean_impute"}
    mode : {"rug", "conditional"}
        Incomplete points as ticks at their observed coordinate in the axis band, or as the
        variant's imputed point with a ±2 sd segment along each missing axis (zero length for
        ``mean_impute``, whose column-mean fill is then treated as observed).
    xlim, ylim : (float, float)
        Axis ranges (the rug band is their lowest ``_RUG`` fraction).
    truth_params : dict, optional
        ``means`` (K, 2) and ``covariances`` (K, 2, 2) of the true mixture (drawn dashed).

    Returns
    -------
    dict with ``points`` (columns x, y, comp, kind, fill, line, size, marker, lw; kinds "data",
    "imputed", "mean", "observed_mean", "model_mean"), ``marks`` (segments x0, y0, x1, y1, comp,
    alpha), ``ellipses`` (2K closed paths: 1 and 2 sd, with comp, lw, la), ``truth`` (paths),
    ``xlim`` and ``ylim``.
    """
    X, missing = data.X, data.missing
    resp = state.resp
    comp = np.array([str(k + 1) for k in resp.argmax(axis=1)], dtype=object)
    alpha = np.clip(resp.max(axis=1), 0.05, 1.0)
    full = ~missing.any(axis=1)
    frame = empty_frame(xlim, ylim)
    parts = [_points("data", X[full, 0], X[full, 1], comp[full], alpha[full])]
    if mode == "rug":
        one = missing.sum(axis=1) == 1
        miss_y, miss_x = one & missing[:, 1], one & missing[:, 0]
        ny, nx = int(miss_y.sum()), int(miss_x.sum())
        band_y = ylim[0] + np.array([0.1, 0.8]) * _RUG * (ylim[1] - ylim[0])
        band_x = xlim[0] + np.array([0.1, 0.8]) * _RUG * (xlim[1] - xlim[0])
        x0 = np.r_[X[miss_y, 0], np.full(nx, band_x[0])]
        x1 = np.r_[X[miss_y, 0], np.full(nx, band_x[1])]
        y0 = np.r_[np.full(ny, band_y[0]), X[miss_x, 1]]
        y1 = np.r_[np.full(ny, band_y[1]), X[miss_x, 1]]
        rows = np.r_[np.flatnonzero(miss_y), np.flatnonzero(miss_x)]
    else:
        if variant == "mean_impute":
            filled, sd = np.where(missing, data.col_mean, X), np.zeros_like(X)
        else:
            cond = ConditionalMixture.from_gaussian_mixture(
                X, state.weights, state.means, state.covariances, covariance_type=covariance_type,
                missing=missing)
            filled, sd = cond.mean(), np.sqrt(cond.variance())
        part = ~full
        parts.append(_points("imputed", filled[part, 0], filled[part, 1], comp[part], alpha[part]))
        r, c = np.nonzero(missing)  # one segment per missing entry, along its own axis
        lo, hi = filled[r, c] - 2 * sd[r, c], filled[r, c] + 2 * sd[r, c]
        x0, x1 = np.where(c == 0, lo, filled[r, 0]), np.where(c == 0, hi, filled[r, 0])
        y0, y1 = np.where(c == 1, lo, filled[r, 1]), np.where(c == 1, hi, filled[r, 1])
        rows = r
    fade = 1.0 if mode == "rug" else 0.45  # long ±2 sd bars would hide the points
    frame["marks"] = {"x0": x0, "y0": y0, "x1": x1, "y1": y1, "comp": comp[rows], "alpha": fade * alpha[rows]}
    K = state.means.shape[0]
    names = np.array([str(k + 1) for k in range(K)], dtype=object)
    obs_mean, model_mean = np.nanmean(X, axis=0), state.weights @ state.means
    parts += [_points("mean", state.means[:, 0], state.means[:, 1], names),
              _points("observed_mean", obs_mean[:1], obs_mean[1:], "mean"),
              _points("model_mean", model_mean[:1], model_mean[1:], "mean")]
    frame["points"] = _concat(parts)
    frame["ellipses"] = [dict(p, lw=lw, la=la) for s, lw, la in ((2.0, 1.0, 0.6), (1.0, 2.5, 1.0))
                         for p in ellipse_paths(state.means, state.covariances, s)]
    if truth_params is not None:
        frame["truth"] = [{"x": p["x"], "y": p["y"]} for s in (1.0, 2.0)
                          for p in ellipse_paths(truth_params["means"], truth_params["covariances"], s)]
    return frame


def panel_overlay(data: dict, x=None, y=None):
    """DynamicMap callback: the overlay of one panel (4 elements whatever the data), an ``hv.Overlay``.

    ``x`` and ``y`` come from the panel's Tap stream; clicks are handled by its subscriber.
    """
    import holoviews as hv
    import holoviews.plotting.bokeh  # registers the Bokeh plotting options used in .opts

    f = data
    xd, yd = hv.Dimension("x", range=f["xlim"]), hv.Dimension("y", range=f["ylim"])
    truth = hv.Path(f["truth"], kdims=[xd, yd]).opts(color="#555555", line_dash="dashed", line_width=1.5)
    ellipses = hv.Contours(f["ellipses"], kdims=[xd, yd], vdims=["comp", "lw", "la"]).opts(
        color="comp", cmap=COLORS, line_width="lw", line_alpha="la")
    marks = hv.Segments(f["marks"], [hv.Dimension("x0", range=f["xlim"]), hv.Dimension("y0", range=f["ylim"]),
                                     "x1", "y1"], ["comp", "alpha"]).opts(
        color="comp", cmap=COLORS, line_width=2, alpha="alpha")
    points = hv.Points(f["points"], [xd, yd], list(_POINT_COLUMNS[2:])).opts(
        color="comp", cmap=COLORS, fill_alpha="fill", line_alpha="line", size="size", marker="marker",
        line_width="lw")
    return hv.Overlay([truth, ellipses, marks, points])



def fit_axes(plot, element) -> None:
    """Plot hook of the scatter panels: fit the axes to the frame's limits when they change.

    The limits are the ``range`` of the frame's ``x`` and ``y`` dimensions (the data's, with margins).
    They are set on the figure's ranges (and on what Bokeh's Reset tool goes back to) only when they
    differ from the ones this hook last set on this plot: a new data set, other columns or a larger
    clicked canvas move the axes, while a zoom survives the steps of the same data. HoloViews itself
    applies a DynamicMap frame's ranges only with ``framewise=True`` on the elements, which would
    undo a zoom on every step (and ``framewise`` on the overlay is ignored: the axes never moved).
    Running at render time, the hook also works when a served page coalesces several frames.
    """
    try:
        xlim, ylim = element.get_dimension("x").range, element.get_dimension("y").range
    except AttributeError:  # no such dimension
        return
    limits = (tuple(xlim), tuple(ylim))
    if not all(isinstance(v, (int, float)) and np.isfinite(v) for v in limits[0] + limits[1]):
        return
    if getattr(plot, "_explorer_fitted_limits", None) == limits:
        return
    plot._explorer_fitted_limits = limits
    fig = plot.state
    for rng, (lo, hi) in ((fig.x_range, xlim), (fig.y_range, ylim)):
        values = {"start": lo, "end": hi}
        if hasattr(rng, "reset_start"):  # Range1d: Bokeh's Reset tool returns here
            values |= {"reset_start": lo, "reset_end": hi}
        rng.update(**values)


#: The iteration axis of a trace spans at least 0 to this (at iteration 0 it would be an empty -1 to 1).
TRACE_MIN_ITERATIONS = 10
