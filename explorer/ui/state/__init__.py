"""Param objects of the pages (layer L2): settings as parameters, outputs as constant parameters.

No Panel import here: these objects run headless in scripts, tests and notebooks, and the
pages in :mod:`explorer.ui.pages` render them.
"""
