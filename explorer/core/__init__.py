"""Numerical core of explorer (layer L0): numpy and scipy only.

Submodules are imported explicitly (``from explorer.core.em_gmm import fit``); nothing is
imported eagerly here, so ``import explorer.core`` costs almost nothing and never pulls in
pandas, xarray, param, Panel, HoloViews, Bokeh, scikit-learn or matplotlib
(``tests/test_architecture.py`` enforces this). See ``docs/ARCHITECTURE.md`` for the layers and
conventions (``missing`` is True where a value is missing; randomness comes from an injected
``numpy.random.Generator``; no explicit matrix inverses).
"""
