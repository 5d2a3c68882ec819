r"""The "MAR is not enough" page: the Table 3.1 MAR mechanism, and Table 3.3 as a live picture.

Marlin (2008) Section 3.4 (marlin2008 digest, sections 2.3-2.5). One
:class:`~explorer.ui.state.mar_table_model.MARTableModel` holds the five Table 3.1 parameters, the data
distribution (a, b, c, d) and the simulation settings (sliders in the sidebar, kept in the URL). The main area:

* a validity indicator: green when every entry of P(r | x) is a probability and P(x) sums to 1, red with each
  failed inequality otherwise;
* the 4 x 4 response table P(r | x) with P(x) beside it (a negative entry in red);
* the Table 3.3 picture: x = β − δ (β swept over its valid range), the true P(X1 = 1) (flat), the closed form
  P(X1 = 1 | R1 = 1) where the factorised estimate converges, and simulated means ± 1 s.e. of the factorised
  and the EM estimates, the current β − δ dashed;
* a sentence with the bias at the current setting, computed from these numbers.

The plot is a Bokeh figure made once per session (:class:`SweepPlot`): a change only replaces its sources' data.
The result is computed on the session's worker (shared across sessions for the same settings, see
:meth:`~explorer.ui.state.mar_table_model.MARTableModel.compute`) and drawn on the event loop. The frame is built by
the pure function :func:`sweep_frame`; the table by :func:`table_html`.
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, Legend, LegendItem, Range1d
from bokeh.plotting import figure
from panel.viewable import Viewer

from explorer.core.missingness.mar_table import CODES
from explorer.ui.components.flow import flow
from explorer.ui.components.notebook import notebook_layout
from explorer.ui.page import sync_with_url
from explorer.ui.plots.figures import figure_pane
from explorer.ui.session import Redraw, hold, push, run_then
from explorer.ui.state.mar_table_model import MARTableModel, MARTableResult
from explorer.ui.weak import weak_callback

__all__ = ["MARTableView", "SweepPlot", "create_model", "sweep_frame", "table_html", "validity_markdown"]

COLORS = {"truth": "#111111", "closed": "#d62728", "em": "#1f77b4", "fact": "#ff7f0e", "current": "#2ca02c"}
_SYMBOLS = (("α", "β", "γ", "1−α−β−γ"), ("α", "δ", "γ", "1−α−δ−γ"), ("α", "β", "λ", "1−α−β−λ"),
            ("α", "δ", "λ", "1−α−δ−λ"))

EXPLANATION = """
### What am I looking at?
Two binary variables x1, x2 can each go unobserved; r = (r1, r2) says which are seen. **Table 3.1** (Marlin 2008,
section 3.2) is the most general *MAR* mechanism: the probability of a response pattern may depend only on the
values it shows. Nothing seen (r = 00): the same α for every x. Only x2 seen (r = 01): β if x2 = 0, δ if x2 = 1.
Only x1 seen (r = 10): γ if x1 = 0, λ if x1 = 1. Both seen: the rest.

Under MAR, maximum likelihood on the observed data of the **true** model is unbiased: EM on the full 2 x 2 joint
φ (eq. 3.4.5, with the C⁰ term the thesis forgot) recovers P(X1 = 1) = c + d (blue points on the flat line).
A **simpler** model that treats x1 and x2 as independent, P(x) = θ<sub>x1,1</sub> θ<sub>x2,2</sub>, has the
observed-data estimate θ<sub>11</sub> = Σ r<sub>1n</sub> x<sub>1n</sub> / Σ r<sub>1n</sub> (eq. 3.4.2), the
frequency of x1 = 1 among the cases where x1 is seen. It converges to P(X1 = 1 | R1 = 1) (red curve,
eqs. 3.4.3-3.4.4), which equals c + d only when β = δ: when x2 is MCAR. Cases with only x2 seen carry
information about x1 through the correlation of x1 and x2, which the factorised model has assumed away.

**Try**: move β to δ (the bias vanishes); make x1 and x2 independent (a d = b c, e.g. a, b, c, d = 0.16, 0.24,
0.24, 0.36: the bias vanishes too, since x2 then says nothing about x1); push α + β + γ above 1 (the table is no
longer a distribution). Table 3.3 of the thesis is the default setting with β − δ from 0.05 to 0.5.
"""


def create_model(**settings) -> MARTableModel:
    """The default model of the page: the Table 3.3 setting at β = 0.35, 10 points of 20 x 2000 cases."""
    return MARTableModel(**settings)


# --------------------------------------------------------------------------- pure builders
def validity_markdown(result: MARTableResult) -> str:
    """The validity indicator's text (Markdown; numbers only)."""
    if result.valid:
        return "**Valid MAR setting:** every entry of P(r | x) is in [0, 1] and P(x) sums to 1."
    return "**Not a valid setting:**\n\n" + "\n".join(f"- {p}" for p in result.problems)


def table_html(result: MARTableResult) -> str:
    """The 4 x 4 response table P(r | x) (symbol and value per cell) with P(x) beside it, as an HTML table."""
    head = "".join(f"<th>r = {c}</th>" for c in CODES)
    rows = []
    for i, code in enumerate(CODES):
        cells = []
        for j in range(4):
            v = float(result.table[i, j])
            bad = v < -1e-12 or v > 1 + 1e-12
            style = ' style="background:#f8d7da;color:#b00020;font-weight:600"' if bad else ""
            cells.append(f"<td{style}>{_SYMBOLS[i][j]}<br><b>{v:.3f}</b></td>")
        rows.append(f"<tr><th>x = {code}</th>{''.join(cells)}<td class='px'>{'abcd'[i]} = "
                    f"<b>{float(result.joint[i]):.3f}</b></td></tr>")
    total = sum(result.joint)
    style = "" if abs(total - 1) <= 1e-6 else ' style="color:#b00020;font-weight:600"'
    foot = f"<tr><td colspan='5'></td><td{style}>Σ = {total:.3f}</td></tr>"
    return ("<table class='mar-table'><caption>P(r | x), Table 3.1, and P(x), Table 3.2</caption>"
            f"<thead><tr><th></th>{head}<th>P(x)</th></tr></thead><tbody>{''.join(rows)}{foot}</tbody></table>")


_TABLE_CSS = """
:host table.mar-table {border-collapse: collapse; font-size: 14px; margin-top: 6px;}
:host table.mar-table caption {caption-side: top; text-align: left; font-weight: 600; padding-bottom: 4px;}
:host table.mar-table th, :host table.mar-table td {border: 1px solid #ccc; padding: 4px 8px; text-align: center;
  white-space: nowrap;}
:host table.mar-table td.px {background: #f4f6fa;}
"""


def empty_frame(title: str = "No estimate: the setting is not valid") -> dict:
    """A frame with nothing to draw (same keys as :func:`sweep_frame`)."""
    e = np.empty(0)
    return {"truth": (e, e), "closed": (e, e), "em": (e, e, e), "fact": (e, e, e), "current": (e, e),
            "xlim": (0.0, 1.0), "ylim": (0.0, 1.0), "title": title}


def sweep_frame(result: MARTableResult) -> dict:
    """What the plot draws for a result: plain arrays (``em``/``fact``: x, mean, s.e.)."""
    s = result.sweep
    if s is None:
        return empty_frame()
    xs = np.r_[s.grid_x, s.x]
    xlim = (float(xs.min()) - 0.03, float(xs.max()) + 0.03)
    ys = np.r_[s.truth, s.closed, s.em_mean - s.em_se, s.em_mean + s.em_se, s.fact_mean - s.fact_se,
               s.fact_mean + s.fact_se]
    ys = ys[np.isfinite(ys)]
    lo, hi = float(ys.min()), float(ys.max())
    pad = max(0.08 * (hi - lo), 0.005)
    ylim = (lo - pad, hi + pad)
    x0 = float(s.x[s.current])
    return {"truth": (np.array(xlim), np.array([s.truth, s.truth])), "closed": (s.grid_x, s.closed),
            "em": (s.x, s.em_mean, s.em_se), "fact": (s.x, s.fact_mean, s.fact_se),
            "current": (np.array([x0, x0]), np.array(ylim)), "xlim": xlim, "ylim": ylim,
            "title": f"Estimates of P(X1 = 1) as β − δ varies ({s.repeats} x {s.n_cases} cases per point)"}


class SweepPlot:
    """The Table 3.3 picture as a Bokeh figure made once; :meth:`update` only replaces its sources' data, its
    ranges and its title (see :mod:`explorer.ui.plots.figures`). Each renderer is named after its legend label."""

    _LABELS = {"truth": "true P(X1 = 1) = c + d", "closed": "P(X1 = 1 | R1 = 1), closed form",
               "em": "EM on the full joint (± 1 s.e.)", "fact": "factorised θ11, eq. 3.4.2 (± 1 s.e.)",
               "current": "current β − δ"}

    def __init__(self):
        self.x_range, self.y_range = Range1d(0.0, 1.0), Range1d(0.0, 1.0)
        fig = figure(x_range=self.x_range, y_range=self.y_range, sizing_mode="stretch_width", min_height=460,
                     height=460, tools="pan,wheel_zoom,box_zoom,save,reset", toolbar_location="above",
                     x_axis_label="β − δ", y_axis_label="P(X1 = 1)", title="Computing…")
        self.sources = {k: ColumnDataSource({"x": [], "y": []}) for k in ("truth", "closed", "current")}
        self.sources |= {k: ColumnDataSource({"x": [], "y": [], "lo": [], "hi": []}) for k in ("em", "fact")}
        s = self.sources
        items = {
            "truth": [fig.line("x", "y", source=s["truth"], color=COLORS["truth"], line_width=2, name=self._LABELS["truth"])],
            "closed": [fig.line("x", "y", source=s["closed"], color=COLORS["closed"], line_width=3,
                               name=self._LABELS["closed"])],
        }
        for key, marker in (("em", "circle"), ("fact", "square")):
            bars = fig.segment("x", "lo", "x", "hi", source=s[key], color=COLORS[key], line_width=2)
            dots = fig.scatter("x", "y", source=s[key], color=COLORS[key], size=9, marker=marker, name=self._LABELS[key])
            items[key] = [bars, dots]
        items["current"] = [fig.line("x", "y", source=s["current"], color=COLORS["current"], line_dash="dashed",
                                     line_width=2, name=self._LABELS["current"])]
        fig.add_layout(Legend(items=[LegendItem(label=self._LABELS[k], renderers=r) for k, r in items.items()],
                              ncols=2, label_text_font_size="9pt", location="center"), "below")
        self.figure = fig
        self.pane = figure_pane(fig, sizing_mode="stretch_width", min_height=480)
        # the figure in a marked box (a Bokeh pane's own CSS classes go to the figure's shadow root)
        self.view = pn.Column(self.pane, sizing_mode="stretch_width", min_width=520, css_classes=["mar-sweep"])
        self.frame: dict | None = None

    def update(self, frame: dict) -> None:
        """Draw a :func:`sweep_frame` (data, ranges and title only)."""
        self.frame = frame
        for key in ("truth", "closed", "current"):
            x, y = frame[key]
            self.sources[key].data = {"x": np.asarray(x, float), "y": np.asarray(y, float)}
        for key in ("em", "fact"):
            x, mean, se = (np.asarray(v, float) for v in frame[key])
            self.sources[key].data = {"x": x, "y": mean, "lo": mean - se, "hi": mean + se}
        (x0, x1), (y0, y1) = frame["xlim"], frame["ylim"]
        self.x_range.update(start=x0, end=x1, reset_start=x0, reset_end=x1)
        self.y_range.update(start=y0, end=y1, reset_start=y0, reset_end=y1)
        self.figure.title.text = frame["title"]


# --------------------------------------------------------------------------- the view
class MARTableView(Viewer):
    """Sliders for Table 3.1 / 3.2 and the simulation; validity, response table, the Table 3.3 plot, a sentence."""

    model = param.ClassSelector(class_=MARTableModel, doc="The settings and computations shown on the page")

    def __init__(self, **params):
        if params.get("model") is None:
            params["model"] = MARTableModel()
        super().__init__(**params)
        self.result: MARTableResult | None = None
        self._redraw = Redraw(self._draw)  # Bokeh models are changed on the session's event loop only
        self._build()
        self.model.param.watch(weak_callback(self._on_settings), list(self.model._SETTINGS))
        self.refresh()

    def __panel__(self):
        return self._layout

    def _build(self):
        m = self.model
        w = pn.widgets

        def slider(p, label, **kw):
            return w.FloatSlider.from_param(p, label=label, step=0.01, throttled=True, **kw)

        self._normalise = w.Button(label="Normalise P(x)", color="default",
                                   description="Rescale a, b, c, d to sum to 1")
        # a strong callback from a sidebar widget: the session (which holds the sidebar) keeps this view alive,
        # while the model's watchers on the view are weak (see _weak)
        self._normalise.on_click(lambda event: self.model.normalise())
        self.sidebar = pn.Column(
            "### Mechanism P(r | x) (Table 3.1)",
            slider(m.param.alpha, "α: P(r = 00 | x), nothing seen"),
            slider(m.param.beta, "β: P(r = 01 | x2 = 0)"),
            slider(m.param.delta, "δ: P(r = 01 | x2 = 1)"),
            slider(m.param.gamma, "γ: P(r = 10 | x1 = 0)"),
            slider(m.param.lam, "λ: P(r = 10 | x1 = 1)"),
            "### Data P(x) (Table 3.2)",
            slider(m.param.a, "a = P(x = 00)"), slider(m.param.b, "b = P(x = 01)"),
            slider(m.param.c, "c = P(x = 10)"), slider(m.param.d, "d = P(x = 11)"),
            self._normalise,
            "### Simulation",
            w.IntSlider.from_param(m.param.n_cases, label="Cases N per data set", step=50, throttled=True),
            w.IntSlider.from_param(m.param.repeats, label="Data sets per point", throttled=True),
            w.IntSlider.from_param(m.param.n_points, label="Points across β", throttled=True),
            w.IntInput.from_param(m.param.seed, label="Seed"),
            sizing_mode="stretch_width", min_width=300,
        )
        self._sweep = SweepPlot()
        self._plot = self._sweep.view
        self._validity = pn.pane.Alert("", alert_type="success", sizing_mode="stretch_width",
                                       css_classes=["mar-validity"], margin=(5, 10))
        self._table = pn.pane.HTML("", stylesheets=[_TABLE_CSS], css_classes=["response-table"], margin=(0, 10),
                                   width=460)
        self._sentence = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["bias-sentence"],
                                          margin=(0, 10))
        right = pn.Column(self._table, self._sentence, width=480)
        self.main = pn.Column(
            self._validity,
            flow(self._plot, right, min_width=480),  # the table below the plot when they do not fit side by side
            pn.pane.Markdown(EXPLANATION, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
        self._layout = notebook_layout(self.sidebar, self.main)

    # ------------------------------------------------------------------ updates
    def refresh(self) -> None:
        """Compute the result of the current settings (on the session's worker when served) and show it."""
        run_then(self.model.compute, self._computed, key="compute")

    def _computed(self, result: MARTableResult | None, error: BaseException | None = None) -> None:
        if result is not None:
            self.result = result
            self._redraw()

    def _draw(self) -> None:
        """Show :attr:`result` (the plot, the table, the validity, the sentence) on the event loop."""
        result = self.result
        if result is None:
            return
        with hold():
            self._validity.param.update(object=validity_markdown(result),
                                        alert_type="success" if result.valid else "danger")
            self._table.object = table_html(result)
            self._sentence.object = result.sentence()
            self._sweep.update(sweep_frame(result))
        push(self._sweep.pane)

    def _on_settings(self, *events) -> None:
        self.refresh()

    # ------------------------------------------------------------------ URL
    def url_bindings(self) -> list:
        """Every setting of the page kept in the URL."""
        return [(self.model, {k: k for k in self.model._SETTINGS})]

    def sync_url(self) -> bool:
        """Keep the settings in the page URL (when served). Returns True if synced."""
        return sync_with_url(*self.url_bindings())
