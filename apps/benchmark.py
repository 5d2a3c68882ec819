"""Page "Benchmark": the garriga2017 imputation benchmark (thesis Figures A.1-A.5), run in the browser.

Serve on its own with ``panel serve apps/benchmark.py`` (add ``--num-threads 4`` so progress polling
runs off the event loop), or as part of the gallery (``panel serve apps/``, which imports
:func:`create_view`). Every browser session builds its own :class:`BenchmarkModel`; its settings
live in the URL, so a screen can be shared as a link. The run itself is one job per cell on the session's
worker thread (cancelled when the session ends; its worker processes, if any, end with it).
"""

from __future__ import annotations

import panel as pn

from explorer.ui.state.benchmark_model import BenchmarkModel
from explorer.ui.page import page_template
from explorer.ui.pages.benchmark import BenchmarkPage

TITLE = "Imputation benchmark (garriga2017)"


def create_view(**settings) -> BenchmarkPage:
    """The bare Viewer (plain layout, no template) with a fresh BenchmarkModel.

    ``settings`` go to the model (e.g. ``methods=["mean", "poigmm"]``); defaults: Boston, MCAR,
    rates 0.1 / 0.3, mean / poigmm / mice / knn, one repetition, quick settings.
    """
    pn.extension("tabulator")
    return BenchmarkPage(model=BenchmarkModel(**settings))


def create_app() -> pn.template.BootstrapTemplate:
    """The served page: settings and Run / Cancel in the sidebar, progress and the figure grid in main."""
    return page_template(TITLE, create_view, extensions=("tabulator",), threaded=True)


if __name__.startswith("bokeh"):
    create_app().servable()
