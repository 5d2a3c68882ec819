"""The user interface (layers L2-L3): the pages of the gallery and what they are made of.

* :mod:`explorer.ui.state`: param objects holding a page's settings and results (no Panel import:
  they run headless in scripts, tests and notebooks);
* :mod:`explorer.ui.components`: reusable Panel pieces (Step/Play player, data controls, upload,
  data-error banner, downloads, the notebook layout, text read-outs, frames computed on the session's worker);
* :mod:`explorer.ui.plots`: figure builders and the pure functions that compute what they draw;
* :mod:`explorer.ui.pages`: one module per page, named like ``apps/<slug>.py`` (a page never imports
  another page);
* :mod:`explorer.ui.page` (the served template and the base of the pages), :mod:`explorer.ui.url`
  (settings in the URL), :mod:`explorer.ui.text` (user strings escaped), :mod:`explorer.ui.session`
  (the browser session a page belongs to), :mod:`explorer.ui.panel_writes` (every change message Panel queues is
  sent), :mod:`explorer.ui.weak` (callbacks that do not keep a page alive).
"""

from explorer.core.deprecation import moved_modules

# modules of the previous release merged or moved to keep each package at 15 modules or fewer
moved_modules({
    "explorer.ui.plots.histograms": "explorer.ui.plots.bars",
    "explorer.ui.plots.metric_bars": "explorer.ui.plots.bars",
    "explorer.ui.plots.textline": "explorer.ui.components.textline",
    "explorer.ui.plots.frame_jobs": "explorer.ui.components.frame_jobs",
    "explorer.ui.state._images": "explorer.ui.state.fa_model",
})
