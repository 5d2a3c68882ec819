"""Layering rules from docs/ARCHITECTURE.md, checked mechanically.

* ``explorer.core`` (and every module in it) imports numpy/scipy only;
* ``explorer/ui/state`` (L2) and the L1 modules never import Panel, HoloViews or Bokeh;
* ``import explorer`` is lazy (PEP 562) and its public names resolve to the right objects;
* no explicit inverses (``linalg.inv``) and no global numpy random state anywhere in the package.

Import checks run in a fresh interpreter (``subprocess``) because the test process itself has
usually imported everything already.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "explorer"

HEAVY = ("pandas", "xarray", "param", "panel", "holoviews", "bokeh", "sklearn", "matplotlib")
GUI = ("panel", "holoviews", "bokeh")
L1_MODULES = ("explorer.io", "explorer.datasets", "explorer.history", "explorer.impute.gaussian_mixture",
              "explorer.evaluation", "explorer.impute.transformed", "explorer.export", "explorer.persistence",
              "explorer.cli", "explorer.model_selection")

# numpy.random names that do not touch the global RandomState
RNG_OK = {
    "Generator", "default_rng", "SeedSequence", "BitGenerator",
    "PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937",
}

_PROBE = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys

    roots, extra, forbidden = json.loads(sys.argv[1])

    def loaded():
        return {m for m in sys.modules
                if any(m == f or m.startswith(f + ".") for f in forbidden)}

    names, culprits, errors = [], {}, {}
    before = loaded()

    def probe(name):
        global before
        try:
            importlib.import_module(name)
        except Exception as exc:  # report, don't hide: a module that fails to import is a bug
            errors[name] = f"{type(exc).__name__}: {exc}"
            return
        names.append(name)
        now = loaded()
        new = sorted({m.split(".")[0] for m in now - before})
        if new:
            culprits[name] = new
        before = now

    for root in roots:
        probe(root)
        mod = sys.modules.get(root)
        if mod is None or not hasattr(mod, "__path__"):
            continue
        for info in pkgutil.walk_packages(mod.__path__, prefix=root + ".",
                                          onerror=lambda n: errors.setdefault(n, "walk failed")):
            probe(info.name)
    for name in extra:
        probe(name)
    print(json.dumps({"imported": names, "culprits": culprits, "errors": errors}))
    """
)


def _probe_imports(roots, forbidden, extra=()):
    """Import ``roots`` (recursively) and ``extra`` in a fresh interpreter.

    Returns ``(imported, culprits, errors)`` where ``culprits`` maps a module to the forbidden
    top-level packages that first appeared in ``sys.modules`` when it was imported.
    """
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps([list(roots), list(extra), list(forbidden)])],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"import probe crashed:\n{proc.stderr}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["imported"], out["culprits"], out["errors"]


def _existing_l1_modules():
    return [m for m in L1_MODULES if (REPO / (m.replace(".", "/") + ".py")).exists()]


def test_core_imports_only_numpy_and_scipy():
    imported, culprits, errors = _probe_imports(["explorer.core"], HEAVY)
    assert not errors, f"modules under explorer/core failed to import: {errors}"
    assert "explorer.core" in imported
    # every .py file under explorer/core was actually probed
    on_disk = {
        "explorer." + ".".join(p.relative_to(PKG).with_suffix("").parts)
        for p in (PKG / "core").rglob("*.py")
        if p.name != "__init__.py"
    }
    assert on_disk <= set(imported), f"not probed: {sorted(on_disk - set(imported))}"
    assert not culprits, (
        "explorer.core must import numpy/scipy only (docs/ARCHITECTURE.md), but: "
        + "; ".join(f"{m} pulls in {', '.join(pk)}" for m, pk in culprits.items())
    )


def test_import_explorer_is_lazy():
    imported, culprits, errors = _probe_imports([], HEAVY + ("scipy",), extra=["explorer"])
    assert not errors, errors
    assert imported == ["explorer"]
    assert not culprits, f"`import explorer` must not import {culprits['explorer']}"


def test_models_and_l1_never_import_gui_libraries():
    models = PKG / "ui" / "state"
    roots = ["explorer.ui.state"] if models.is_dir() and any(models.rglob("*.py")) else []
    extra = _existing_l1_modules()
    if not roots and not extra:
        pytest.skip("no explorer/ui/state/*.py and no L1 modules (io/datasets/history/imputers) yet")
    imported, culprits, errors = _probe_imports(roots, GUI, extra=extra)
    assert not errors, f"modules failed to import: {errors}"
    assert not culprits, (
        "models (L2) and L1 modules must not import Panel/HoloViews/Bokeh: "
        + "; ".join(f"{m} pulls in {', '.join(pk)}" for m, pk in culprits.items())
    )


def test_lazy_public_api():
    import explorer

    assert explorer.__version__ == "0.1.0"
    listed = dir(explorer)
    for name in explorer._LAZY:
        assert name in listed and name in explorer.__all__
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        explorer.not_a_name  # noqa: B018


def test_version_matches_pyproject():
    import tomllib

    import explorer

    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert explorer.__version__ == meta["project"]["version"]


@pytest.mark.parametrize("name", sorted(__import__("explorer")._LAZY))
def test_lazy_name_resolves(name):
    import importlib

    import explorer

    module_name = explorer._LAZY[name]
    path = REPO / (module_name.replace(".", "/") + ".py")
    if not path.exists():
        pytest.skip(f"{path.relative_to(REPO)} not written yet")
    module = importlib.import_module(module_name)
    assert hasattr(module, name), f"{module_name} must define {name} (exported as explorer.{name})"
    assert getattr(explorer, name) is getattr(module, name)


# --------------------------------------------------------------------------- source rules


def _code_tokens(path: Path):
    """(line, text) of the code tokens of a file: comments and strings removed."""
    skip = {tokenize.COMMENT, tokenize.STRING, tokenize.NL, tokenize.NEWLINE,
            tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
    if sys.version_info >= (3, 12):
        skip |= {tokenize.FSTRING_START, tokenize.FSTRING_MIDDLE, tokenize.FSTRING_END}
    src = path.read_text(encoding="utf-8")
    return [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(src).readline)
            if t.type not in skip]


def find_forbidden_calls(path: Path) -> list[str]:
    """Explicit inverses and global numpy random state in one source file.

    Flags ``<anything>.linalg.inv(``, ``from numpy.linalg/scipy.linalg import inv``,
    ``np.random.<f>`` / ``numpy.random.<f>`` for any ``f`` outside :data:`RNG_OK`, and
    ``from numpy.random import <f>`` likewise. Comments and strings are ignored.
    """
    toks = _code_tokens(path)
    words = [t for _, t in toks]
    found = []
    for i, (line, tok) in enumerate(toks):
        nxt = words[i + 1: i + 6]
        where = f"{path.relative_to(REPO)}:{line}"
        if tok == "linalg" and nxt[:3] == [".", "inv", "("]:
            found.append(f"{where}: linalg.inv( -- use a Cholesky factor and solves")
        if tok in ("np", "numpy") and nxt[:3] == [".", "random", "."] and len(nxt) > 3:
            if (i == 0 or words[i - 1] != ".") and nxt[3] not in RNG_OK:
                found.append(f"{where}: {tok}.random.{nxt[3]} -- take an rng: numpy.random.Generator")
        if tok == "from":
            # from numpy.random import a, b / from numpy.linalg import inv
            window = words[i + 1: i + 10]
            if "import" not in window:  # e.g. `raise X from exc`
                continue
            j = i + 1 + window.index("import")
            mod = "".join(words[i + 1: j])
            imported = []
            for w in words[j + 1:]:
                if w in ("(", ")", ","):
                    continue
                if not w.isidentifier() or w == "from" or w == "import":
                    break
                imported.append(w)
            if mod == "numpy.random":
                bad = [w for w in imported if w not in RNG_OK and w != "as"]
                if bad:
                    found.append(f"{where}: from numpy.random import {', '.join(bad)}")
            if mod in ("numpy.linalg", "scipy.linalg") and "inv" in imported:
                found.append(f"{where}: from {mod} import inv")
    return found


def _package_sources():
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_inverse_and_no_global_random_state():
    problems = [msg for p in _package_sources() for msg in find_forbidden_calls(p)]
    assert not problems, "forbidden calls (docs/ARCHITECTURE.md):\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("code", "n_bad"),
    [
        ("import numpy as np\nx = np.linalg.inv(a)\n", 1),
        ("import scipy.linalg\nx = scipy.linalg.inv(a)\n", 1),
        ("from numpy.linalg import inv, solve\n", 1),
        ("import numpy as np\nnp.random.seed(0)\n", 1),
        ("import numpy as np\nz = np.random.normal(size=3)\n", 1),
        ("from numpy.random import default_rng, normal\n", 1),
        ("import numpy as np\nrng = np.random.default_rng(0)\nz = rng.normal()\n", 0),
        ("import numpy as np\ndef f(rng: np.random.Generator): pass\n", 0),
        ("# np.linalg.inv(a) is forbidden\ns = 'np.random.seed(0)'\n", 0),
        ("from scipy.linalg import cho_factor, cho_solve\nx = np.linalg.solve(a, b)\n", 0),
    ],
)
def test_forbidden_call_detector(tmp_path, monkeypatch, code, n_bad):
    # the detector itself must catch what it claims to catch (and nothing else)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    f = tmp_path / "snippet.py"
    f.write_text(code)
    assert len(find_forbidden_calls(f)) == n_bad, find_forbidden_calls(f)
