r"""Missingness mechanisms ("amputation"): the registry of tabular MCAR / MAR / NMAR masks, image masks, Marlin's
MAR-is-not-enough table, and NMAR sensitivity analysis by delta adjustment.

Modules (imported explicitly, nothing here is imported eagerly):

* :mod:`~explorer.core.missingness.mask_helpers`: Validation and small shared helpers of the missingness mechanisms
  (:mod:`explorer.core.missingness.mechanisms`).
* :mod:`~explorer.core.missingness.image_masks`: Image masks (ghahramani1994, delalleau2012, antypas2023,
  marlin2008): random pixels, quarters, halves, squares.
* :mod:`~explorer.core.missingness.mar_table`: MAR is not enough: the Table 3.1 MAR mechanism for 2-D binary
  data and the Section 3.4 demonstration.
* :mod:`~explorer.core.missingness.mechanisms`: Missingness mechanisms ("amputation") and their registry.
* :mod:`~explorer.core.missingness.sensitivity`: NMAR sensitivity analysis by delta adjustment of multiple
  imputations (pattern-mixture view).
* :mod:`~explorer.core.missingness.tabular_mechanisms`: Tabular missingness mechanisms: MCAR, MAR and NMAR
  masks (garriga2017, ghahramani1994, marlin2008).
"""

__all__ = ["image_masks", "mar_table", "mask_helpers", "mechanisms", "sensitivity", "tabular_mechanisms"]
