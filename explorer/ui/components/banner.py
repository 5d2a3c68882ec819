"""The data error at the top of a page's main area, with the nearest setting that works.

When a data set, an upload or a mechanism setting cannot be applied, the
:class:`~explorer.ui.state.data_model.DataModel` keeps the data it had and sets ``error`` (and,
when it knows one, ``suggestion``). :class:`DataErrorBanner` shows that where the eye is: at the
top of the main area, in plain words, with a button applying the suggestion (e.g. "the largest
feasible rate here is 7.7 % - Use 7.6 %"), and says which settings the results below still show.
While the error stands, the results are dimmed, so they are never taken for the current settings.
"""

from __future__ import annotations

import panel as pn
import param
from panel.viewable import Viewer

from explorer.ui.state.data_model import NO_MECHANISM, DataModel
from explorer.ui.session import hold
from explorer.ui.text import md
from explorer.ui.weak import weak_callback

__all__ = ["DataErrorBanner"]

_DIMMED = {"opacity": "0.35", "pointer-events": "none"}


class DataErrorBanner(Viewer):
    """Error, suggestion and "still showing" line of a ``data_model``; dims ``results`` meanwhile.

    Parameters
    ----------
    data_model : DataModel
    results : list
        Panel objects showing results of the data (dimmed while the error stands).
    """

    data_model = param.ClassSelector(class_=DataModel)
    results = param.List(default=[], doc="Panel objects dimmed while the data error stands")

    def __init__(self, **params):
        super().__init__(**params)
        self._alert = pn.pane.Alert("", alert_type="danger", sizing_mode="stretch_width", margin=(5, 10, 0, 10))
        self._use = pn.widgets.Button(label="", color="primary", visible=False, margin=(0, 10, 5, 10), width=200)
        self._use.on_click(lambda event: self.data_model.apply_suggestion())
        self._layout = pn.Column(self._alert, self._use, visible=False, sizing_mode="stretch_width",
                                 css_classes=["data-error-banner"])
        # the data model may outlive this view (shared by pages)
        self.data_model.param.watch(weak_callback(self._update), ["error", "suggestion", "revision"])
        self._update()

    def __panel__(self):
        return self._layout

    def still_showing(self) -> str:
        """What the results on screen are (Markdown, escaped): data set, mechanism and realised rate."""
        dm = self.data_model
        if dm.data is None or dm.mask is None:
            return "Nothing is shown until a setting works."
        name = md(dm.data.name or dm.dataset)
        if dm.mask.mechanism == NO_MECHANISM:
            how = "its own missing values"
        else:
            how = f"**{md(dm.mask.mechanism)}** ({dm.mask.realised_rate:.1%} missing)"
        return f"The results below are still those of **{name}** with {how}, not of the settings chosen."

    def _update(self, *events) -> None:
        dm = self.data_model
        error = dm.error
        suggestion = dm.suggestion or {}
        with hold():
            if error:
                text = f"**Could not apply the settings:** {md(error)}"
                if suggestion.get("text"):
                    text += f"\n\n{md(suggestion['text'])}"
                self._alert.object = f"{text}\n\n{self.still_showing()}"
            self._use.label = str(suggestion.get("label") or "Use it")
            self._use.visible = bool(error and suggestion.get("settings"))
            self._layout.visible = bool(error)
            for obj in self.results:
                obj.styles = {**{k: v for k, v in (obj.styles or {}).items() if k not in _DIMMED},
                              **(_DIMMED if error else {})}
