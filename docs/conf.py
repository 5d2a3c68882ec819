"""Sphinx configuration of the explorer documentation (``bash scripts/docs.sh`` builds it offline)."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

from docutils.transforms import Transform
from sphinx import addnodes

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
    "myst_nb",  # MyST Markdown pages and the notebooks (myst_parser inside)
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
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

# The notebooks (docs/notebooks/*.ipynb, written by scripts/make_notebook.py --docs with the text outputs of a
# run stored) are rendered as stored, never executed by the build: running them takes longer than the build
# may, and their Panel pages need a live kernel anyway.
nb_execution_mode = "off"
nb_merge_streams = True

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


class _FilesOutsideTheSite(Transform):
    """A Markdown link to a Markdown file outside docs/ (``results/*.md``) becomes a download of that file.

    The pages link the committed results as ``../results/x.md``, which also works where the sources are read as
    they are; MyST takes any ``.md`` target for a page of the site and warns that there is none. A link whose
    file is missing stays a page reference, so it still fails the build (and tests/test_docs_pages.py).
    """

    default_priority = 500  # while reading, before the download collector looks for download references

    def apply(self):
        env = self.document.settings.env
        srcdir = Path(env.srcdir).resolve()
        docdir = Path(env.doc2path(env.docname)).resolve().parent
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst" or node.get("refdomain") != "doc":
                continue
            target = Path(node["reftarget"])
            path = target.with_name(target.name + ".md")
            if not target.is_absolute() or not path.is_file() or path.resolve().is_relative_to(srcdir):
                continue
            download = addnodes.download_reference("", "", *node.children, refdoc=node["refdoc"], reftype="myst",
                                                   refdomain=None, refexplicit=node.get("refexplicit", True),
                                                   reftarget=os.path.relpath(path, docdir))
            node.replace_self(download)


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    app.add_transform(_FilesOutsideTheSite)
