"""Sphinx configuration of the explorer documentation (``bash scripts/docs.sh`` builds it offline)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "explorer"
author = "the explorer developers"
copyright = "2026, the explorer developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",  # the build is offline; the browser loads MathJax to draw the formulas (raw TeX without it)
    "numpydoc",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# the engineering notes are a log for the team, not documentation; ARCHITECTURE.md is included by
# architecture.md; screenshots and figures are included by the pages that show them
exclude_patterns = ["_build", "NOTES.md", "ARCHITECTURE.md", "screenshots", "figures"]
templates_path = ["_templates"]

# API reference: one page per public module (autosummary, recursive), members documented where they are
# defined (a name re-exported by a package is listed there and documented once, at its home)
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "inherited-members": "BaseEstimator", "ignore-module-all": True,
                           "member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
autodoc_mock_imports: list[str] = []
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

myst_heading_anchors = 3

html_theme = "pydata_sphinx_theme"
html_title = "explorer"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_static_path: list[str] = []
html_show_sourcelink = False
nitpicky = False


def _skip_member(app, what, name, obj, skip, options):
    """scikit-learn adds ``set_*_request`` methods to every estimator class (metadata routing): its docs, not
    ours; type aliases (``UrlBinding = tuple[...]``) are not classes to document either."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    if isinstance(obj, types.GenericAlias):
        return True
    if what in ("class", "exception"):  # inherited members: only those explorer defines (not scikit-learn's mixins, not Exception's)
        if name in ("add_note", "with_traceback") or isinstance(
                obj, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
            return True
        module = getattr(obj, "__module__", None)
        if module is not None and not module.startswith("explorer"):
            return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
