"""Frames and the stick-weights figure of the variational-mixture page.

Frames are plain dicts of numpy arrays (what one plot draws for one state), so tests can check them
without a browser: :func:`mixture_frame` is what a mixture panel
(:class:`~explorer.ui.plots.figures.ScatterPanel` with ``ellipses="axes"``) draws: all points as rows
of one source, the ellipses of the components above the weight threshold as rows of one
``multi_line`` source, given by their centres and axes (the number of components shown varies, the
figure's renderers never do). :func:`weights_frame` is what
:class:`StickWeightsPlot` draws: the expected stick weights :math:`E_q[\\pi_k]` of two runs as bars
side by side around ``x = k``, the weight threshold as a dashed line. Both figures are built once per
session; a frame only replaces their sources' data and sets scalar properties (ranges, ticks, a line's
location, legend labels).
"""

from __future__ import annotations

import numpy as np
from bokeh.core.properties import value
from bokeh.models import FixedTicker, Legend, LegendItem, Range1d, Span
from bokeh.plotting import ColumnDataSource, figure

from explorer.ui.plots.figures import figure_pane
from explorer.ui.plots.sources import set_data

__all__ = [
    "POINT_COLUMNS",
    "UPDATE_COLORS",
    "StickWeightsPlot",
    "axis_limits",
    "ellipse_axes",
    "empty_mixture_frame",
    "mixture_frame",
    "plugin_imputation",
    "weights_frame",
]

UPDATE_COLORS = {"principled": "#1f77b4", "thesis": "#d62728"}
POINT_COLUMNS = ("x", "y", "comp", "fill", "line", "size", "marker", "lw")
_MARKS = {  # kind: (fill alpha (None = responsibility), line alpha (None = responsibility), size, marker)
    "observed": (None, 0.0, 6.0, "circle"),
    "imputed": (0.0, None, 8.0, "triangle"),
    "mean": (0.0, 1.0, 14.0, "x"),
}
_POINT_LINE_WIDTH = 1.5


def axis_limits(values: np.ndarray, pair) -> tuple[tuple, tuple]:
    """Axis ranges (5 % margin) of columns ``pair`` of ``values`` (NaN ignored)."""
    v = np.asarray(values, dtype=float)[:, list(pair)]
    lo, hi = np.nanmin(v, axis=0), np.nanmax(v, axis=0)
    span = np.maximum(hi - lo, 1e-6)
    lo, hi = lo - 0.05 * span, hi + 0.05 * span
    return (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))


def _points(kind: str, x, y, comp, resp=None) -> dict:
    n = len(x)
    fill, line, size, marker = _MARKS[kind]
    resp = np.ones(n) if resp is None else np.asarray(resp, dtype=float)
    return {"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float),
            "comp": np.broadcast_to(np.asarray(comp, dtype=object), (n,)).astype(object),
            "fill": resp if fill is None else np.full(n, fill), "line": resp if line is None else np.full(n, line),
            "size": np.full(n, size), "marker": np.full(n, marker, dtype=object), "lw": np.full(n, _POINT_LINE_WIDTH)}


def plugin_imputation(state, values, missing, rows) -> np.ndarray:
    """The plug-in conditional-mean imputation of the data ``rows`` (observed entries unchanged).

    The numbers of :func:`explorer.core.mixtures.vb_dpgmm.conditional` ``(state, data).mean()`` on those rows: the
    Gaussian mixture with weights :math:`E_q[\\pi_k]`, means :math:`m_k` and covariances :math:`\\Psi_k/\\nu_k`
    conditioned on each row's observed entries (a row with nothing observed gets the mixture's mean). Only the
    means are computed, every component at once for each pattern of missing entries: a frame needs them for
    the rows drawn at their imputation, at every step, and the general conditional mixture (all rows,
    conditional covariances, one component at a time) costs several times more.

    Parameters
    ----------
    state : VBState
    values : ndarray (n, D)
        NaN (or anything) at missing entries.
    missing : ndarray of bool (n, D)
    rows : ndarray of int
        The rows to impute.

    Returns
    -------
    ndarray (len(rows), D)
    """
    x = np.array(np.asarray(values, dtype=float)[rows])
    miss = np.asarray(missing, dtype=bool)[rows]
    w, mu, cov = (np.asarray(a, dtype=float) for a in (state.weights, state.means, state.covariances))
    with np.errstate(divide="ignore"):  # a component with weight 0 never takes part
        log_w = np.log(w)
    patterns, which = np.unique(miss, axis=0, return_inverse=True)
    for index, pattern in enumerate(patterns):
        m, o = np.flatnonzero(pattern), np.flatnonzero(~pattern)
        if not m.size:
            continue
        r = np.flatnonzero(which.ravel() == index)
        if not o.size:
            x[np.ix_(r, m)] = w @ mu[:, m]
            continue
        s_oo, s_mo = cov[:, o][:, :, o], cov[:, m][:, :, o]  # (K, |o|, |o|), (K, |m|, |o|)
        diff = x[np.ix_(r, o)][None] - mu[:, None, o]  # (K, rows, |o|)
        chol = np.linalg.cholesky(s_oo)
        z = np.linalg.solve(chol[:, None], diff[..., None])  # L^-1 (x_o - mu_o): (K, rows, |o|, 1)
        log_det = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        log_like = -0.5 * ((z[..., 0] ** 2).sum(axis=2) + log_det[:, None] + o.size * np.log(2.0 * np.pi))
        log_p = log_w[:, None] + log_like  # (K, rows)
        with np.errstate(under="ignore"):
            resp = np.exp(log_p - log_p.max(axis=0))
        resp /= resp.sum(axis=0)
        solved = np.linalg.solve(np.swapaxes(chol, 1, 2)[:, None], z)  # S_oo^-1 (x_o - mu_o)
        cond = mu[:, None, m] + (s_mo[:, None] @ solved)[..., 0]  # (K, rows, |m|)
        x[np.ix_(r, m)] = np.einsum("kr,krm->rm", resp, cond)
    return x


def ellipse_axes(covariances: np.ndarray) -> np.ndarray:
    """The 1-sd ellipses of 2-D Gaussians as matrices ``A`` (K, 2, 2): the ellipse of covariance ``S`` centred on
    ``m`` is the path ``m + A (cos t, sin t)``, the set ``(x - m)' S^-1 (x - m) = 1``.

    ``A`` is ``U diag(sqrt(lambda))`` for the eigen-decomposition ``S = U diag(lambda) U'`` (the construction of
    :func:`~explorer.ui.plots.mixture2d.ellipse_paths`, for all components at once).
    """
    covariances = np.asarray(covariances, dtype=float)
    if not len(covariances):
        return np.zeros((0, 2, 2))
    evals, evecs = np.linalg.eigh(0.5 * (covariances + np.swapaxes(covariances, -1, -2)))
    return evecs * np.sqrt(np.clip(evals, 0.0, None))[:, None, :]


def empty_mixture_frame(xlim=(0.0, 1.0), ylim=(0.0, 1.0)) -> dict:
    """A frame that draws nothing (no data or no state)."""
    e = _points("observed", [], [], "1")
    return {"points": e, "ellipses": [], "xlim": xlim, "ylim": ylim, "shown": np.zeros(0, dtype=int)}


def mixture_frame(state, values, missing, imputed, pair, xlim, ylim, threshold: float = 1e-2) -> dict:
    """Everything one mixture panel draws for one variational state, on the columns ``pair``.

    Parameters
    ----------
    state : VBState
        ``resp`` (n, K), ``weights`` (K,) = :math:`E_q[\\pi_k]`, ``means`` (K, D), ``covariances`` (K, D, D).
    values : ndarray (n, D)
        Data, NaN at missing entries.
    missing : ndarray of bool (n, D)
    imputed : ndarray (n, D)
        The model's single imputation (observed entries equal ``values``).
    pair : (int, int)
        Columns on the x and y axes.
    xlim, ylim : (float, float)
    threshold : float
        Components with :math:`E[\\pi_k]` at or below it are not drawn.

    Returns
    -------
    dict
        ``points`` (columns ``POINT_COLUMNS``): rows observed on both axes as filled circles, rows
        with a missing coordinate on either axis at their imputation as hollow triangles, both
        coloured by the argmax responsibility (opacity = that responsibility), component means as
        crosses; ``ellipses``: the 2 sd, then the 1 sd contours of the shown components, each a dict
        with its ``center`` (2,) and ``axes`` (2, 2) (see :func:`ellipse_axes`: the browser traces the
        path), ``comp``, and line width ``lw`` and opacity ``la`` growing with the weight; ``shown``:
        indices of the shown components; ``xlim``, ``ylim``. The page adds ``xlabel`` and ``ylabel``
        (the column names).
    """
    i, j = pair
    resp = np.asarray(state.resp)
    w = np.asarray(state.weights)
    names = np.array([str(k + 1) for k in range(w.size)], dtype=object)
    comp = names[resp.argmax(axis=1)]
    alpha = np.clip(resp.max(axis=1), 0.1, 1.0)
    inc = np.asarray(missing)[:, [i, j]].any(axis=1)
    shown = np.flatnonzero(w > threshold)
    means = np.asarray(state.means)[shown][:, [i, j]]
    covs = np.asarray(state.covariances)[shown][:, [i, j]][:, :, [i, j]]
    parts = [_points("observed", values[~inc, i], values[~inc, j], comp[~inc], alpha[~inc]),
             _points("imputed", imputed[inc, i], imputed[inc, j], comp[inc], alpha[inc]),
             _points("mean", means[:, 0], means[:, 1], names[shown])]
    points = {c: np.concatenate([p[c] for p in parts]) for c in POINT_COLUMNS}
    relative = w[shown] / max(float(w.max()), 1e-12)
    unit = ellipse_axes(covs)
    ellipses = []
    for scale, base in ((2.0, 0.5), (1.0, 1.0)):
        for center, axes, name, rel in zip(means, scale * unit, names[shown], relative):
            ellipses.append({"center": center, "axes": axes, "comp": name, "lw": base * (1.0 + 3.0 * float(rel)),
                             "la": base * (0.35 + 0.65 * float(rel))})
    return {"points": points, "ellipses": ellipses, "xlim": xlim, "ylim": ylim, "shown": shown}


def _update_color(label: str, fallback: str) -> str:
    return UPDATE_COLORS.get(label.split()[0] if label else "", fallback)


def weights_frame(weights_a, weights_b, label_a: str, label_b: str, threshold: float) -> dict:
    """The stick weights of two runs (either may be None) as bars side by side around ``x = k`` (k = 1..K).

    Returns
    -------
    dict
        ``a``, ``b``: the weights :math:`E_q[\\pi_k]`; ``bars``: for each run the bars ``left``, ``right``
        and ``top`` (run A left of ``k``, run B right of it, 0.4 wide, at numeric positions); ``labels``
        and ``colors`` of the two runs (the colour of their update); ``threshold``; ``K`` (at least 1);
        ``xlim`` (0.4 to K + 0.6), ``ylim`` (0 to 8 % above the heaviest weight, at least 0.1) and the
        ``ticks`` 1..K.
    """
    wa = np.zeros(0) if weights_a is None else np.asarray(weights_a, dtype=float)
    wb = np.zeros(0) if weights_b is None else np.asarray(weights_b, dtype=float)
    K = int(max(wa.size, wb.size, 1))
    bars = []
    for w, left in ((wa, True), (wb, False)):
        x = np.arange(1, w.size + 1, dtype=float)
        x0, x1 = (x - 0.4, x) if left else (x, x + 0.4)
        bars.append({"left": x0, "right": x1, "top": w})
    top = max(float(np.max(np.r_[wa, wb, 0.1])), 0.1)
    return {"a": wa, "b": wb, "bars": bars, "labels": (label_a, label_b),
            "colors": (_update_color(label_a, UPDATE_COLORS["principled"]),
                       _update_color(label_b, UPDATE_COLORS["thesis"])),
            "threshold": float(threshold), "K": K, "xlim": (0.4, K + 0.6), "ylim": (0.0, 1.08 * top),
            "ticks": list(range(1, K + 1))}


class StickWeightsPlot:
    """The stick weights of two runs as bars, built once; :meth:`update` only replaces data and scalars.

    Parameters
    ----------
    height : int
        Height in pixels (the width follows the page).

    Attributes
    ----------
    figure : bokeh.plotting.figure
    pane : panel.pane.Bokeh
        What a page lays out.
    sources : list of ColumnDataSource
        The bars of run A and run B (columns ``left``, ``right``, ``top``).
    threshold : bokeh.models.Span
        The weight threshold (dashed).
    frame : dict or None
        The last frame drawn (see :func:`weights_frame`).
    """

    def __init__(self, height: int = 280):
        first = weights_frame(None, None, "principled update", "thesis update", 0.01)
        self.x_range, self.y_range = Range1d(*first["xlim"]), Range1d(*first["ylim"])
        # no toolbar: of the tools only a drag (pan) can be used, the others are not made
        fig = figure(x_range=self.x_range, y_range=self.y_range, height=height, sizing_mode="stretch_width",
                     tools="pan", toolbar_location=None, title="Stick weights E[π_k]", x_axis_label="component k",
                     y_axis_label="E[π_k]", min_border_left=40)
        fig.xgrid.visible = fig.ygrid.visible = False
        self.ticker = FixedTicker(ticks=first["ticks"])
        fig.xaxis.ticker = self.ticker
        self.sources = [ColumnDataSource({"left": np.empty(0), "right": np.empty(0), "top": np.empty(0)})
                        for _ in range(2)]
        self.bars = [fig.quad(left="left", right="right", bottom=0.0, top="top", source=s, fill_color=c,
                              line_color="black")
                     for s, c in zip(self.sources, first["colors"])]
        self.threshold = Span(location=first["threshold"], dimension="width", line_color="#555555",
                              line_dash="dashed", line_width=1)
        fig.add_layout(self.threshold)
        # above the frame, on one line: inside it covered the bars of components 6-8
        self.legend_items = [LegendItem(label=value(label), renderers=[r]) for label, r in zip(first["labels"],
                                                                                               self.bars)]
        fig.add_layout(Legend(items=self.legend_items, orientation="horizontal", location="center", ncols=2,
                              label_text_font_size="9pt"), "above")
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width")
        self.frame: dict | None = None
        self._shown = {"labels": first["labels"], "colors": first["colors"], "ticks": first["ticks"]}

    def update(self, frame: dict) -> None:
        """Draw ``frame`` (a :func:`weights_frame` dict): data and scalar properties only, no new model."""
        self.frame = frame
        for source, bars in zip(self.sources, frame["bars"]):  # at most 30 bars: numbers in the message
            set_data(source, {k: np.asarray(bars[k], dtype=float).tolist() for k in ("left", "right", "top")})
        self.x_range.update(start=frame["xlim"][0], end=frame["xlim"][1])
        self.y_range.update(start=frame["ylim"][0], end=frame["ylim"][1])
        self.threshold.location = frame["threshold"]
        shown = self._shown
        if frame["ticks"] != shown["ticks"]:  # the truncation K changed
            shown["ticks"] = list(frame["ticks"])
            self.ticker.ticks = shown["ticks"]
        if tuple(frame["labels"]) != shown["labels"] or tuple(frame["colors"]) != shown["colors"]:  # A's update
            shown["labels"], shown["colors"] = tuple(frame["labels"]), tuple(frame["colors"])
            for item, renderer, label, color in zip(self.legend_items, self.bars, frame["labels"], frame["colors"]):
                item.label = value(label)
                renderer.glyph.fill_color = color
