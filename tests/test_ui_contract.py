"""The import contract of ``explorer/ui`` (issue 19), checked on the source (function-level imports count).

* a page (``explorer/ui/pages/<slug>.py``) never imports another page: what two pages share lives in
  ``explorer/ui/components`` or ``explorer/ui/plots``;
* ``explorer/ui/state`` (param objects) imports nothing else of ``explorer/ui`` but itself, and no Panel,
  HoloViews or Bokeh (the import probe in ``test_architecture`` checks what is really loaded);
* components and plots never import a page; nothing in ``explorer`` imports ``apps``;
* every page of the gallery (``apps/<slug>.py``) has its page module of the same name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UI = REPO / "explorer" / "ui"


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, at any depth (``from . import x`` resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(REPO) if path.is_relative_to(REPO) else Path(path.name)
    package = ".".join(rel.with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]  # `from pkg import module`
    return out


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _offences(files, bad) -> list[str]:
    out = []
    for path in files:
        for line, mod in imported_modules(path):
            if bad(path, mod):
                out.append(f"{path.relative_to(REPO)}:{line} imports {mod}")
    return out


def _is_page(mod: str) -> bool:
    return mod.startswith("explorer.ui.pages.") and mod.split(".")[3] not in ("__init__",)


def test_no_page_imports_another_page():
    pages = [p for p in _modules(UI / "pages") if p.name != "__init__.py"]
    assert len(pages) >= 15

    def bad(path, mod):
        return _is_page(mod) and mod.split(".")[3] != path.stem
    assert not _offences(pages, bad)


def test_components_and_plots_import_no_page():
    files = _modules(UI / "components") + _modules(UI / "plots") + _modules(UI / "state")
    files += [p for p in UI.glob("*.py")]
    assert not _offences(files, lambda path, mod: _is_page(mod))


def test_state_imports_only_state_of_the_ui():
    def bad(path, mod):
        gui = mod.split(".")[0] in ("panel", "holoviews", "bokeh")
        return gui or (mod.startswith("explorer.ui.") and not mod.startswith("explorer.ui.state"))
    assert not _offences(_modules(UI / "state"), bad)


def test_nothing_in_the_package_imports_apps():
    assert not _offences(_modules(REPO / "explorer"), lambda path, mod: mod == "apps" or mod.startswith("apps."))


@pytest.mark.parametrize("app", sorted(p.stem for p in (REPO / "apps").glob("*.py") if p.stem != "main"))
def test_every_app_has_its_page_module(app):
    assert (UI / "pages" / f"{app}.py").exists(), f"apps/{app}.py has no explorer/ui/pages/{app}.py"


def test_the_checker_sees_function_level_imports(tmp_path):
    """The contract would be hollow if an import inside a function escaped it."""
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from explorer.ui.pages.neumann import NeumannView\n")
    assert (2, "explorer.ui.pages.neumann") in imported_modules(f)
