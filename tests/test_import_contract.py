"""The import contract of ``explorer`` (issue 20), read from the source with :mod:`ast`.

Every ``import`` statement counts, at module level or inside a function (a function-level import that closes a
cycle is still a cycle); only the imports under ``if TYPE_CHECKING:`` are left out (they never run). Rules:

1. no import cycle between the modules of ``explorer``;
2. no private name imported from another package: ``from a.b import _x`` only inside package ``a``; a private
   module or package (``a._m``) only from ``a`` and its sub-packages;
3. numba is imported only under ``explorer/core/_compiled``;
4. ``explorer.core`` imports no param, panel, holoviews, bokeh or xarray;
5. nothing in ``explorer`` imports ``apps``;
6. no page module (``explorer/ui/pages``) imports another.

Each rule's checker is tested on a small synthetic package too, so a checker that finds nothing is a real pass.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE_FORBIDDEN = ("param", "panel", "holoviews", "bokeh", "xarray")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name of the importing file
    module: str  # the imported module (resolved: a submodule when ``from pkg import submodule``)
    name: str | None  # the imported attribute when it is not a module (``from m import name``), else None
    line: int


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def collect(root: Path, package: str = "explorer") -> tuple[dict[str, Path], list[Import]]:
    """Modules of ``package`` under ``root`` and every import statement in them."""
    files = {_module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    imports: list[Import] = []
    for me, path in files.items():
        pkg = me if path.name == "__init__.py" else me.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
                continue
            if isinstance(node, ast.Import):
                imports.extend(Import(me, a.name, None, node.lineno) for a in node.names)
                continue
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                if full in files:
                    imports.append(Import(me, full, None, node.lineno))
                else:
                    imports.append(Import(me, mod, a.name, node.lineno))
    return files, imports


def _package_of(module: str, files: dict[str, Path]) -> str:
    path = files.get(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def cycles(files: dict[str, Path], imports: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself)."""
    graph: dict[str, set[str]] = {m: set() for m in files}
    for imp in imports:
        if imp.module in files and imp.module != imp.importer:
            graph[imp.importer].add(imp.module)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:  # iterative Tarjan (the graph has hundreds of modules)
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def private_imports(files: dict[str, Path], imports: list[Import]) -> list[str]:
    bad = []
    for imp in imports:
        if not imp.module.startswith("explorer"):
            continue
        me_pkg = _package_of(imp.importer, files)
        segments = imp.module.split(".")
        for i, seg in enumerate(segments):
            if seg.startswith("_") and not seg.startswith("__"):
                owner = ".".join(segments[:i])
                if not (me_pkg == owner or me_pkg.startswith(owner + ".")):
                    bad.append(f"{imp.importer}:{imp.line} imports the private module {imp.module}")
                break
        if imp.name and imp.name.startswith("_") and not imp.name.startswith("__"):
            if _package_of(imp.module, files) != me_pkg:
                bad.append(f"{imp.importer}:{imp.line} imports the private name {imp.name} of {imp.module}")
    return bad


def _top(module: str) -> str:
    return module.split(".")[0]


def numba_outside_compiled(imports: list[Import]) -> list[str]:
    return [f"{i.importer}:{i.line}" for i in imports
            if _top(i.module) == "numba" and not i.importer.startswith("explorer.core._compiled")]


def core_gui_imports(imports: list[Import]) -> list[str]:
    return [f"{i.importer}:{i.line} imports {i.module}" for i in imports
            if i.importer.startswith("explorer.core") and _top(i.module) in CORE_FORBIDDEN]


def apps_imports(imports: list[Import]) -> list[str]:
    return [f"{i.importer}:{i.line} imports {i.module}" for i in imports if _top(i.module) == "apps"]


def page_imports(imports: list[Import]) -> list[str]:
    pages = "explorer.ui.pages."
    return [f"{i.importer}:{i.line} imports {i.module}" for i in imports
            if i.importer.startswith(pages) and i.module.startswith(pages) and i.module != i.importer]


# --------------------------------------------------------------------------- the package itself
@pytest.fixture(scope="module")
def package():
    return collect(REPO)


def test_the_contract_reads_the_whole_package(package):
    files, imports = package
    assert len(files) > 150 and len(imports) > 1000
    # function-level imports are read: explorer.ui.state.ratings_model loads its models lazily
    assert any(i.importer == "explorer.core.mixtures.em_gmm" and i.module.startswith("explorer.core._compiled")
               for i in imports)


def test_no_import_cycle(package):
    assert cycles(*package) == []


def test_no_private_name_from_another_package(package):
    assert private_imports(*package) == []


def test_numba_only_in_core_compiled(package):
    assert numba_outside_compiled(package[1]) == []


def test_core_imports_no_gui_or_xarray(package):
    assert core_gui_imports(package[1]) == []


def test_nothing_imports_apps(package):
    assert apps_imports(package[1]) == []


def test_no_page_imports_another_page(package):
    assert page_imports(package[1]) == []


# --------------------------------------------------------------------------- the checkers find what they look for
def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_checkers_on_a_synthetic_package(tmp_path):
    _write(tmp_path, {
        "explorer/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from explorer.a import f\n",
        "explorer/a.py": "def f():\n    from explorer.b import g\n",  # function-level: still an edge
        "explorer/b.py": "from explorer import a\nfrom explorer.core.x import _private\nimport apps.page\n",
        "explorer/core/__init__.py": "",
        "explorer/core/x.py": "import numba\nimport xarray as xr\n_private = 1\n",
        "explorer/core/y.py": "from explorer.core.x import _private\nfrom explorer.core._compiled import k\n",
        "explorer/core/_compiled/__init__.py": "",
        "explorer/core/_compiled/k.py": "import numba\n",
        "explorer/core/sub/__init__.py": "",
        "explorer/core/sub/z.py": "from explorer.core._compiled import k\nfrom explorer.core.x import _private\n",
        "explorer/ui/__init__.py": "",
        "explorer/ui/pages/__init__.py": "",
        "explorer/ui/pages/one.py": "from explorer.ui.pages import two\nfrom explorer.core._compiled import k\n",
        "explorer/ui/pages/two.py": "from . import one\n",
    })
    files, imports = collect(tmp_path)
    found = cycles(files, imports)
    assert sorted(map(tuple, found)) == [("explorer.a", "explorer.b"),
                                         ("explorer.ui.pages.one", "explorer.ui.pages.two")]
    private = private_imports(files, imports)
    # b (package explorer) and z (explorer.core.sub) take x's private name; one reaches into core._compiled
    assert len(private) == 3 and any("explorer.b:2" in p for p in private)
    assert any("explorer.core.sub.z:2" in p for p in private)
    assert any("explorer.ui.pages.one:2" in p and "private module" in p for p in private)
    assert not any(p.startswith("explorer.core.y") for p in private)  # same package; _compiled under core
    assert numba_outside_compiled(imports) == ["explorer.core.x:1"]
    assert core_gui_imports(imports) == ["explorer.core.x:2 imports xarray"]
    assert apps_imports(imports) == ["explorer.b:3 imports apps.page"]
    assert len(page_imports(imports)) == 2
