"""Param model objects (layer L2): settings as parameters, outputs as constant parameters.

No Panel import here: these objects run headless in scripts, tests and notebooks, and the
views in :mod:`explorer.views` render them.
"""
