"""The package's layout (issue 20): old paths as warning aliases, sizes, and docs/ARCHITECTURE.md against the tree."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "explorer"
MAX_MODULES = 15
BIG_MODULE = 800


def _moves() -> dict:
    """Every old path registered with explorer.core.deprecation.moved_modules (after importing the packages)."""
    import explorer  # noqa: F401  (registers the library's and the core's moves)
    import explorer.ui  # noqa: F401
    from explorer.core import deprecation

    return dict(deprecation._FINDER.moves)


def test_every_old_path_is_registered():
    moves = _moves()
    for old in ("explorer.core.em_gmm", "explorer.core.vb_dpgmm", "explorer.core.conditional", "explorer.core.mfa",
                "explorer.core.mechanisms", "explorer.core.cpt_v", "explorer.core.discriminant", "explorer.imputers",
                "explorer.dp_imputer", "explorer.fa_imputers", "explorer.transforms", "explorer.ui.plots.histograms"):
        assert old in moves
    assert len(moves) >= 50
    for old, new in moves.items():  # an alias never shadows a real module
        assert importlib.util.find_spec(old.rpartition(".")[0]) is not None
        assert not (REPO / (old.replace(".", "/") + ".py")).exists(), old
        for target in new if isinstance(new, tuple) else (new,):
            assert (REPO / (target.replace(".", "/") + ".py")).exists(), target


def test_every_old_path_warns_and_gives_the_new_module():
    """In a fresh interpreter: each old path imports with a DeprecationWarning and is the new module itself."""
    code = textwrap.dedent("""
        import importlib, json, sys, warnings
        import explorer, explorer.ui
        from explorer.core import deprecation
        failures = []
        for old, new in sorted(deprecation._FINDER.moves.items()):
            targets = new if isinstance(new, tuple) else (new,)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                module = importlib.import_module(old)
            if not any(issubclass(w.category, DeprecationWarning) and old in str(w.message) for w in caught):
                failures.append(f"{old}: no DeprecationWarning")
            parts = [importlib.import_module(t) for t in targets]
            if len(parts) == 1 and module is not parts[0]:
                failures.append(f"{old} is not {targets[0]}")
            for part in parts[1:] if len(parts) == 1 else parts:
                for name in part.__all__:
                    if getattr(module, name) is not getattr(part, name):
                        failures.append(f"{old}.{name}")
        print(json.dumps(failures))
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_old_from_import_of_a_moved_module_and_of_a_split_module():
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("error", DeprecationWarning)
        try:
            from explorer.core import em_gmm
        except DeprecationWarning as exc:
            assert "explorer.core.mixtures.em_gmm" in str(exc)
        else:
            raise AssertionError("no warning")
        warnings.simplefilter("ignore", DeprecationWarning)
        from explorer.imputers import GaussianMixtureImputer, amputate
        from explorer.impute.gaussian_mixture import GaussianMixtureImputer as G
        from explorer.masking import amputate as a
        assert GaussianMixtureImputer is G and amputate is a
        import explorer.imputers
        try:
            explorer.imputers.no_such_name
        except AttributeError:
            pass
        else:
            raise AssertionError("an unknown name must raise AttributeError")
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_new_paths_import_without_warnings():
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("error", DeprecationWarning)
        import explorer, explorer.ui.page
        from explorer import GaussianMixtureImputer, DPGMMImputer, MFAImputer, TransformedImputer, amputate, evaluate
        from explorer.core.mixtures import em_gmm, prior, suffstats
        from explorer.impute import GaussianMixtureImputer as G
        assert G is GaussianMixtureImputer
    """)
    result = subprocess.run([sys.executable, "-W", "error::DeprecationWarning:explorer", "-c", code], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


# --------------------------------------------------------------------------- sizes
def _packages() -> list[Path]:
    return sorted(p.parent for p in PKG.rglob("__init__.py"))


def test_no_package_holds_more_than_15_modules():
    too_big = {str(p.relative_to(REPO)): n for p in _packages()
               if (n := len([m for m in p.glob("*.py") if m.name != "__init__.py"])) > MAX_MODULES}
    assert too_big == {}


def test_a_module_over_800_lines_names_its_one_concept():
    """Its docstring opens with one sentence saying what the module is (no list of unrelated things)."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") <= BIG_MODULE:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        first = doc.split("\n\n")[0]
        if not first or first.lstrip().startswith(("*", "-")) or len(first) > 400:
            bad.append(str(path.relative_to(REPO)))
    assert bad == []


def test_family_packages_list_their_modules():
    for family in ("gaussians", "mixtures", "factor", "missingness", "discrete", "classifiers"):
        module = importlib.import_module(f"explorer.core.{family}")
        public = sorted(p.stem for p in (PKG / "core" / family).glob("*.py") if not p.stem.startswith("_"))
        assert sorted(module.__all__) == public, family
        for name in public:
            assert f"explorer.core.{family}.{name}" in module.__doc__, (family, name)


# --------------------------------------------------------------------------- docs/ARCHITECTURE.md
def described_modules(text: str) -> set[str]:
    """``explorer/...py`` paths named in the Layers block: package lines end with ``/``, module lines list files."""
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    package = None
    found = set()
    for line in block.splitlines():
        first = line.split()[0] if line.split() else ""
        if not line.startswith(" ") and first.endswith("/"):
            package = first
            continue
        if package is None or not line.startswith(" "):
            continue
        names = re.findall(r"^\s+((?:[\w.]+\.py(?:,\s*)?)+)", line)
        if names:
            for name in re.split(r",\s*", names[0].strip().rstrip(",")):
                found.add(package + name)
    return found


def test_architecture_describes_every_module_and_only_real_ones():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    described = described_modules(text)
    actual = {str(p.relative_to(REPO)) for p in PKG.rglob("*.py")
              if p.name != "__init__.py" or p.parent in (PKG, PKG / "core", PKG / "ui")}
    assert sorted(actual - described) == [], "modules docs/ARCHITECTURE.md does not describe"
    assert sorted(described - actual) == [], "modules docs/ARCHITECTURE.md describes that do not exist"


def test_architecture_reader_finds_what_it_should():
    text = "## Layers\n\n```\nexplorer/core/   L0\n  a.py   x\nexplorer/ui/pages/   L3\n  b.py, c.py  y\napps/\n```\n"
    assert described_modules(text) == {"explorer/core/a.py", "explorer/ui/pages/b.py", "explorer/ui/pages/c.py"}
