"""numba's on-disk cache of a kernel module is keyed on that module's file only; the modules that inline another
module's kernels drop their cache when that module changes (:func:`explorer.core._compiled.drop_stale_cache`)."""

from __future__ import annotations

import ast
from pathlib import Path

import explorer.core._compiled as compiled
from explorer.core._compiled import drop_stale_cache

PACKAGE = Path(compiled.__file__).parent


def _package(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "base.py").write_text("def kernel(): return 1\n")
    user = tmp_path / "user.py"
    user.write_text("from base import kernel\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    return user, cache


def _cached(cache: Path) -> None:
    """numba's files for a kernel of each module, and a bytecode file (numba's business and Python's)."""
    for name in ("user.f-3.py311.nbi", "user.f-3.py311.1.nbc", "base.kernel-1.py311.nbi", "user.cpython-311.pyc"):
        (cache / name).write_text("x")


def test_the_cache_of_a_module_is_dropped_when_a_module_it_inlines_changes(tmp_path):
    user, cache = _package(tmp_path)
    _cached(cache)
    # no fingerprint yet: a cache of unknown provenance is dropped, the fingerprint written
    assert drop_stale_cache(str(user), "base") is True
    kept = sorted(p.name for p in cache.iterdir())
    assert kept == ["base.kernel-1.py311.nbi", "user.cpython-311.pyc", "user.depends"]
    # the same sources: the cache is kept
    _cached(cache)
    assert drop_stale_cache(str(user), "base") is False
    assert (cache / "user.f-3.py311.nbi").exists() and (cache / "user.f-3.py311.1.nbc").exists()
    # an edit of the inlined module drops the user's cache only (the base's own cache is numba's business)
    (tmp_path / "base.py").write_text("def kernel(): return 2\n")
    assert drop_stale_cache(str(user), "base") is True
    assert not (cache / "user.f-3.py311.nbi").exists() and not (cache / "user.f-3.py311.1.nbc").exists()
    assert (cache / "base.kernel-1.py311.nbi").exists() and (cache / "user.cpython-311.pyc").exists()
    assert drop_stale_cache(str(user), "base") is False


def test_a_cache_that_cannot_be_written_is_left_alone(tmp_path):
    """File-system errors are ignored (the cache is an optimisation): here ``__pycache__`` is a file."""
    (tmp_path / "base.py").write_text("def kernel(): return 1\n")
    (tmp_path / "user.py").write_text("from base import kernel\n")
    (tmp_path / "__pycache__").write_text("not a directory")
    assert drop_stale_cache(str(tmp_path / "user.py"), "base") is False
    assert drop_stale_cache(str(tmp_path / "user.py"), "missing_module") is False  # an unreadable source too


def test_every_kernel_module_that_imports_a_sibling_drops_its_stale_cache():
    """A module that imports from another kernel module (numba inlines the callees into its machine code) calls
    drop_stale_cache(__file__, <those modules>) at import."""
    siblings = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    users = {}
    for name in sorted(siblings):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        imported = {node.module.rsplit(".", 1)[1] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module and node.module.startswith("explorer.core._compiled.")}
        calls = [node for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                 and getattr(node.value.func, "id", None) == "drop_stale_cache"]
        declared = {arg.value for call in calls for arg in call.value.args[1:]}
        assert declared == imported & siblings, name
        if imported:
            users[name] = imported
    assert users == {"vb_dpgmm": {"gmm"}, "factor": {"gmm"}}
