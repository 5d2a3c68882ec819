"""One module per page of the gallery, named like ``apps/<slug>.py``. A page never imports another page:
what two pages share lives in :mod:`explorer.ui.components` or :mod:`explorer.ui.plots`."""
