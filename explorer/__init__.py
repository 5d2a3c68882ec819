"""explorer: probabilistic imputation of missing data, with live Panel apps.

The public names below are loaded lazily (PEP 562), so ``import explorer`` and
``import explorer.core`` stay light: the numerical core needs numpy and scipy only, and pandas,
xarray, scikit-learn, param and Panel are imported the first time a name that needs them is used.

>>> import explorer
>>> explorer.GaussianMixtureImputer      # doctest: +SKIP  (imports explorer.impute.gaussian_mixture now)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from explorer.core.deprecation import moved_modules

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "GaussianMixtureImputer": "explorer.impute.gaussian_mixture",
    "DPGMMImputer": "explorer.impute.dp_mixture",
    "FactorAnalysisImputer": "explorer.impute.factor",
    "MFAImputer": "explorer.impute.factor",
    "MixedMixtureImputer": "explorer.impute.mixed",
    "amputate": "explorer.masking",
    "load_dataset": "explorer.datasets",
    "list_datasets": "explorer.datasets",
    "IncompleteData": "explorer.core.data",
    "ConditionalMixture": "explorer.core.gaussians.conditional",
    "NegativeIntervalWarning": "explorer.core.gaussians.conditional",
    "NIWPrior": "explorer.core.mixtures.em_gmm",
    "ComponentCollapseWarning": "explorer.core.mixtures.em_gmm",
    "IterationInfo": "explorer.core.loop",
    "FitInterruptedWarning": "explorer.core.loop",
    "evaluate": "explorer.evaluation",
    "held_out_scorer": "explorer.evaluation",
    "TransformedImputer": "explorer.impute.transformed",
    "suggest_transforms": "explorer.impute.transformed",
    "save_model": "explorer.persistence",
    "load_model": "explorer.persistence",
    "export_imputations": "explorer.export",
    "sensitivity_analysis": "explorer.sensitivity",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:  # pragma: no cover - for static analysers only
    from explorer.core.data import IncompleteData
    from explorer.core.gaussians.conditional import ConditionalMixture, NegativeIntervalWarning
    from explorer.core.loop import FitInterruptedWarning, IterationInfo
    from explorer.core.mixtures.em_gmm import ComponentCollapseWarning, NIWPrior
    from explorer.datasets import list_datasets, load_dataset
    from explorer.evaluation import evaluate, held_out_scorer
    from explorer.export import export_imputations
    from explorer.persistence import load_model, save_model
    from explorer.impute.dp_mixture import DPGMMImputer
    from explorer.impute.factor import FactorAnalysisImputer, MFAImputer
    from explorer.impute.gaussian_mixture import GaussianMixtureImputer
    from explorer.impute.mixed import MixedMixtureImputer
    from explorer.impute.transformed import TransformedImputer, suggest_transforms
    from explorer.masking import amputate
    from explorer.sensitivity import sensitivity_analysis


# the layout of the previous release: old module paths warn and give the module at its new path
# (explorer.imputers held amputate too: its alias looks in both modules)
moved_modules({
    "explorer.imputers": ("explorer.impute.gaussian_mixture", "explorer.masking"),
    "explorer.dp_imputer": "explorer.impute.dp_mixture",
    "explorer.fa_imputers": "explorer.impute.factor",
    "explorer.transforms": "explorer.impute.transformed",
    "explorer._imputer_base": "explorer.impute.base",
    "explorer._progress": "explorer.utils.progress",
    "explorer._workers": "explorer.utils.workers",
    "explorer._memory": "explorer.utils.memory",
})


def __getattr__(name: str) -> Any:
    try:
        module_name = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'explorer' has no attribute {name!r}") from None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:  # a real missing dependency inside the module: surface it
            raise
        raise AttributeError(
            f"explorer.{name} lives in {module_name}, which is not available in this installation"
        ) from exc
    value = getattr(module, name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
