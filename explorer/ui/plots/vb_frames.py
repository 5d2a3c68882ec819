"""Pure frame builders and HoloViews element builders of the variational-mixture page.

Frames are plain dicts of numpy arrays (what one panel draws for one state), so tests can check
them without a browser. Element builders are the ``hv.DynamicMap`` callbacks: each returns an
overlay whose structure never changes (one ``hv.Points`` for all points, one ``hv.Contours`` for
all ellipses with per-path ``comp``/``lw``/``la`` values, ``hv.Rectangles`` at numeric positions
for the stick weights), so streamed updates patch the Bokeh sources in place.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd

from explorer.ui.plots.mixture2d import COLORS, ellipse_paths, trace_curve  # noqa: F401 (the traces, shared)

__all__ = [
    "POINT_COLUMNS",
    "UPDATE_COLORS",
    "axis_limits",
    "empty_mixture_frame",
    "mixture_frame",
    "mixture_overlay",
    "trace_buffer",
    "weights_frame",
    "weights_overlay",
]

UPDATE_COLORS = {"principled": "#1f77b4", "thesis": "#d62728"}
POINT_COLUMNS = ("x", "y", "comp", "fill", "line", "size", "marker")
_MARKS = {  # kind: (fill alpha (None = responsibility), line alpha (None = responsibility), size, marker)
    "observed": (None, 0.0, 6.0, "circle"),
    "imputed": (0.0, None, 8.0, "triangle"),
    "mean": (0.0, 1.0, 14.0, "x"),
}


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
            "size": np.full(n, size), "marker": np.full(n, marker, dtype=object)}


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
        crosses; ``ellipses``: 1 and 2 sd contours of the shown components with line width and
        opacity growing with the weight; ``shown``: indices of the shown components.
    """
    i, j = pair
    resp = np.asarray(state.resp)
    comp = np.array([str(k + 1) for k in resp.argmax(axis=1)], dtype=object)
    alpha = np.clip(resp.max(axis=1), 0.1, 1.0)
    inc = np.asarray(missing)[:, [i, j]].any(axis=1)
    w = np.asarray(state.weights)
    shown = np.flatnonzero(w > threshold)
    means = np.asarray(state.means)[shown][:, [i, j]]
    covs = np.asarray(state.covariances)[shown][:, [i, j]][:, :, [i, j]]
    names = np.array([str(k + 1) for k in shown], dtype=object)
    parts = [_points("observed", values[~inc, i], values[~inc, j], comp[~inc], alpha[~inc]),
             _points("imputed", imputed[inc, i], imputed[inc, j], comp[inc], alpha[inc]),
             _points("mean", means[:, 0], means[:, 1], names)]
    points = {c: np.concatenate([p[c] for p in parts]) for c in POINT_COLUMNS}
    wmax = max(float(w.max()), 1e-12)
    ellipses = []
    for scale, base in ((2.0, 0.5), (1.0, 1.0)):
        for p, k in zip(ellipse_paths(means, covs, scale), shown):
            rel = float(w[k]) / wmax
            ellipses.append({"x": p["x"], "y": p["y"], "comp": str(k + 1), "lw": base * (1.0 + 3.0 * rel),
                             "la": base * (0.35 + 0.65 * rel)})
    return {"points": points, "ellipses": ellipses, "xlim": xlim, "ylim": ylim, "shown": shown}


def weights_frame(weights_a, weights_b, label_a: str, label_b: str, threshold: float) -> dict:
    """Stick weights of two models (either may be None) as two bar sets around x = k + 1."""
    wa = np.zeros(0) if weights_a is None else np.asarray(weights_a, dtype=float)
    wb = np.zeros(0) if weights_b is None else np.asarray(weights_b, dtype=float)
    return {"a": wa, "b": wb, "label_a": label_a, "label_b": label_b, "threshold": float(threshold),
            "K": int(max(wa.size, wb.size, 1))}


def mixture_overlay(data: dict) -> hv.Overlay:
    """DynamicMap callback of a mixture panel: ellipses and points (2 elements whatever the data)."""
    f = data
    xd = hv.Dimension("x", label=f.get("xlabel", "x"), range=f["xlim"])
    yd = hv.Dimension("y", label=f.get("ylabel", "y"), range=f["ylim"])
    ellipses = hv.Contours(f["ellipses"], kdims=[xd, yd], vdims=["comp", "lw", "la"]).opts(
        color="comp", cmap=COLORS, line_width="lw", line_alpha="la")
    points = hv.Points(f["points"], [xd, yd], list(POINT_COLUMNS[2:])).opts(
        color="comp", cmap=COLORS, fill_alpha="fill", line_alpha="line", size="size", marker="marker",
        line_width=1.5)
    return hv.Overlay([ellipses, points]).opts(xlabel=f.get("xlabel", "x"), ylabel=f.get("ylabel", "y"))


def weights_overlay(data: dict) -> hv.Overlay:
    """DynamicMap callback: E[pi_k] bars of both models (numeric positions, never categorical)."""
    K = data["K"]
    dims = [hv.Dimension("bk", label="component k"), hv.Dimension("bw", label="E[π_k]"), "bk1", "bw1"]

    def bars(w, left: bool):
        x = np.arange(1, w.size + 1, dtype=float)
        x0, x1 = (x - 0.4, x) if left else (x, x + 0.4)
        return (x0, np.zeros_like(x), x1, w)

    a = hv.Rectangles(bars(data["a"], True), kdims=dims, label=data["label_a"]).opts(
        color=UPDATE_COLORS.get(data["label_a"].split()[0], "#1f77b4"))
    b = hv.Rectangles(bars(data["b"], False), kdims=dims, label=data["label_b"]).opts(
        color=UPDATE_COLORS.get(data["label_b"].split()[0], "#d62728"))
    top = max(float(np.max(np.r_[data["a"], data["b"], 0.1])), 0.1)
    line = hv.HLine(data["threshold"]).opts(color="#555555", line_dash="dashed", line_width=1)
    ticks = [(k, str(k)) for k in range(1, K + 1)]
    return (a * b * line).opts(
        {"Rectangles": dict(xlim=(0.4, K + 0.6), ylim=(0, 1.08 * top), framewise=True, line_color="black",
                            xticks=ticks, xlabel="component k", ylabel="E[π_k]"),
         # above the frame, on one line: inside it covered the bars of components 6-8
         "Overlay": dict(legend_position="top", legend_cols=2)})


def trace_buffer(column: str) -> hv.streams.Buffer:
    """An empty per-iteration trace (columns ``iteration`` and ``column``)."""
    return hv.streams.Buffer(pd.DataFrame({"iteration": np.empty(0, dtype=int), column: np.empty(0)}),
                             length=5000, index=False)
