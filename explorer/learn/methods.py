"""The registry of classifiers that learn from (and predict on) inputs with missing features.

Marlin (2008), chapter 6 (digest section 5): every method here is a scikit-learn classifier whose
``X`` may contain NaN. :data:`METHODS` maps a short name to a :class:`MethodSpec`
``(label, family, factory)``; ``factory(random_state)`` returns a fresh, unfitted estimator and
:func:`make_method` is the usual entry point::

    >>> import numpy as np
    >>> from explorer.learn.methods import METHODS, make_method
    >>> clf = make_method("lr_zero", random_state=0)
    >>> X = np.array([[0.0, 1.0], [np.nan, 2.0], [1.0, np.nan], [2.0, 3.0], [3.0, 2.0], [np.nan, 0.5]])
    >>> clf.fit(X, [0, 0, 1, 1, 1, 0]).predict_proba(X).sum(axis=1).round(6).tolist()
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]

The estimators themselves live in other modules of :mod:`explorer.learn` (``joint``,
``discriminant``, ``treatments``, ``kernel_logistic``) and are imported lazily, inside the
factories. A method is registered only when its module is present in this installation
(:data:`MISSING_MODULES` lists the absent ones), so the registry never offers a method that cannot
be built. Two methods are plain scikit-learn pipelines and are always there: logistic regression
after zero or mean imputation (the thesis's "LR Zero" / "LR Mean", eqs. 6.3.1-6.3.6); when
:mod:`explorer.learn.treatments` is present they are built with its ``MissingInputClassifier``
instead (same model).

Fixed settings (the thesis chooses regularisation by 5-fold cross-validation; here they are fixed so
that a fit takes well under a second on a few hundred rows):

* logistic regression: L2 penalty with ``C = 1``;
* neural nets: one hidden layer of 6 logistic units (Table 6.4), trained by L-BFGS with weight decay
  ``alpha = 0.01`` and ``max_iter = 500``, one start (the thesis keeps the best of 5 restarts);
* kernel logistic regression: Gaussian kernel with sigma^2 = 2 and polynomial kernel of degree 2
  (section 6.4 settings), with and without response augmentation (the "o+r" kernels, eqs. 6.5.4-6.5.10);
* multiple imputation: 5 imputations drawn from one Gaussian (K = 1) fitted by missing-data EM (the
  thesis's "Mix K=1" row of Table 6.2; it fits MFA imputation models with K = 1..3);
* LDA-FA: one factor (Q = 1), generative or discriminative training (section 6.2.5-6.2.6);
* RDA: alpha = gamma = 0.5 (eq. 6.2.19; the thesis picks them by leave-one-out CV);
* Gaussian mixture classifiers (EM on incomplete features): K = 1 and K = 2 components per class.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from explorer.core.validation import BadInputError

__all__ = ["FAMILIES", "METHODS", "MISSING_MODULES", "MethodSpec", "make_method", "method_names", "stepped_methods"]

#: Families, in the order the page lists them.
FAMILIES = ("Generative mixture (EM)", "Discriminant analysis", "Logistic regression", "Kernel logistic regression",
            "Neural network")

_LR_C = 1.0
_NN_HIDDEN = (6,)
_NN_MAX_ITER = 500
_NN_ALPHA = 1e-2
_N_IMPUTATIONS = 5


@dataclass(frozen=True)
class MethodSpec:
    """One registered method.

    Attributes
    ----------
    label : str
        Name shown to people (e.g. "LR, mean imputation").
    family : str
        One of :data:`FAMILIES`.
    factory : callable
        ``factory(random_state) -> estimator``: a fresh unfitted scikit-learn classifier accepting
        NaN in ``X`` (``fit``, ``predict_proba``, ``classes_``).
    treatment : str
        How missing inputs are handled: "marginalise", "zero", "mean", "multiple", "reduced",
        "augmented" (the thesis's frameworks, digest section 5.1).
    stepped : bool
        True for the EM mixture classifiers, whose fit can be run one EM iteration at a time
        (:mod:`explorer.core.classifiers.joint_mixture`).
    """

    label: str
    family: str
    factory: Callable
    treatment: str = ""
    stepped: bool = False


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# --------------------------------------------------------------------------- factories
def _logistic(random_state):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=_LR_C, max_iter=1000)


def _mlp(random_state):
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier(hidden_layer_sizes=_NN_HIDDEN, activation="logistic", solver="lbfgs", alpha=_NN_ALPHA,
                         max_iter=_NN_MAX_ITER, random_state=_sk_seed(random_state))


def _sk_seed(random_state):
    """An int seed for scikit-learn estimators (which take no numpy Generator)."""
    if random_state is None:
        return None
    if isinstance(random_state, int) and not isinstance(random_state, bool):
        return random_state
    import numpy as np

    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31 - 1))
    raise BadInputError(f"random_state must be None, an int or a numpy.random.Generator; got {random_state!r}.")


def _sklearn_imputed_lr(strategy: str):
    """Logistic regression after zero / mean imputation, as a scikit-learn pipeline (no treatments module)."""

    def factory(random_state=None):
        from sklearn.impute import SimpleImputer
        from sklearn.pipeline import make_pipeline

        imputer = (SimpleImputer(strategy="constant", fill_value=0.0, keep_empty_features=True) if strategy == "zero"
                   else SimpleImputer(strategy="mean", keep_empty_features=True))
        return make_pipeline(imputer, _logistic(random_state))

    return factory


def _treated(base: Callable, treatment: str):
    """``MissingInputClassifier(base(random_state), treatment=...)`` of :mod:`explorer.learn.treatments`."""

    def factory(random_state=None):
        from explorer.learn.treatments import MissingInputClassifier

        kwargs = {}
        if treatment == "multiple":
            from explorer.impute.gaussian_mixture import GaussianMixtureImputer

            # one Gaussian (K = 1): its EM fit has no random start, so S separate fits would be S copies of
            # one model; one fit and S draws from it is the same procedure at 1/S of the cost
            kwargs = {"n_imputations": _N_IMPUTATIONS, "imputation_models": "one",
                      "imputer": GaussianMixtureImputer(n_components=1, empty_rows="marginal")}
        return MissingInputClassifier(base(random_state), treatment=treatment, random_state=random_state, **kwargs)

    return factory


def _mixture(n_components: int, structure: str = "per_class"):
    def factory(random_state=None):
        from explorer.learn.joint import GaussianMixtureClassifier

        return GaussianMixtureClassifier(n_components=n_components, structure=structure, random_state=random_state)

    return factory


def _discriminant(name: str, **kwargs):
    def factory(random_state=None):
        from explorer.learn import discriminant

        cls = getattr(discriminant, name)
        if "random_state" in cls().get_params():
            kwargs.setdefault("random_state", random_state)
        return cls(**kwargs)

    return factory


def _klr(kernel: str, augmented: bool):
    def factory(random_state=None):
        from explorer.learn.kernel_logistic import KernelLogisticRegression

        options = {"sigma2": 2.0} if kernel == "gaussian" else {"degree": 2}
        return KernelLogisticRegression(kernel=kernel, augmented=augmented, **options)

    return factory


# --------------------------------------------------------------------------- the registry
_TREATMENT_LABELS = {"zero": "zero imputation", "mean": "mean imputation", "multiple": "multiple imputation (K = 1)",
                     "reduced": "reduced models", "augmented": "response augmentation"}


def _build() -> tuple[dict[str, MethodSpec], tuple[str, ...]]:
    methods: dict[str, MethodSpec] = {}
    missing: list[str] = []

    def need(module: str) -> bool:
        ok = _has(module)
        if not ok and module not in missing:
            missing.append(module)
        return ok

    fam_gen, fam_da, fam_lr, fam_klr, fam_nn = FAMILIES
    if need("explorer.learn.joint"):
        methods["gmm_k1"] = MethodSpec("Gaussian classes (EM), K = 1 per class", fam_gen, _mixture(1),
                                       "marginalise", stepped=True)
        methods["gmm_k2"] = MethodSpec("Gaussian mixtures (EM), K = 2 per class", fam_gen, _mixture(2),
                                       "marginalise", stepped=True)
    if need("explorer.learn.discriminant"):
        methods["lda"] = MethodSpec("LDA", fam_da, _discriminant("LDAClassifier"), "marginalise")
        methods["qda"] = MethodSpec("QDA", fam_da, _discriminant("QDAClassifier"), "marginalise")
        methods["rda"] = MethodSpec("RDA (alpha = gamma = 0.5)", fam_da,
                                    _discriminant("RDAClassifier", alpha=0.5, gamma=0.5), "marginalise")
        methods["lda_fa_gen"] = MethodSpec("LDA-FA, generative", fam_da,
                                           _discriminant("LDAFAClassifier", n_factors=1, training="generative"),
                                           "marginalise")
        methods["lda_fa_dis"] = MethodSpec("LDA-FA, discriminative", fam_da,
                                           _discriminant("LDAFAClassifier", n_factors=1, training="discriminative"),
                                           "marginalise")
    treatments = need("explorer.learn.treatments")
    for t in ("zero", "mean", "multiple", "reduced", "augmented"):
        if treatments:
            methods[f"lr_{t}"] = MethodSpec(f"LR, {_TREATMENT_LABELS[t]}", fam_lr, _treated(_logistic, t), t)
        elif t in ("zero", "mean"):  # plain scikit-learn until the treatments module exists
            methods[f"lr_{t}"] = MethodSpec(f"LR, {_TREATMENT_LABELS[t]}", fam_lr, _sklearn_imputed_lr(t), t)
    if need("explorer.learn.kernel_logistic"):
        methods["klr_gauss"] = MethodSpec("Gaussian KLR, zero (o kernel)", fam_klr, _klr("gaussian", False), "zero")
        methods["klr_gauss_aug"] = MethodSpec("Gaussian KLR, o+r kernel", fam_klr, _klr("gaussian", True),
                                              "augmented")
        methods["klr_poly"] = MethodSpec("Polynomial KLR, zero (o kernel)", fam_klr, _klr("polynomial", False),
                                         "zero")
        methods["klr_poly_aug"] = MethodSpec("Polynomial KLR, o+r kernel", fam_klr, _klr("polynomial", True),
                                             "augmented")
    if treatments:
        for t in ("zero", "mean", "multiple", "reduced", "augmented"):
            methods[f"nn_{t}"] = MethodSpec(f"Neural net (6 units), {_TREATMENT_LABELS[t]}", fam_nn,
                                            _treated(_mlp, t), t)
    return methods, tuple(missing)


#: name -> :class:`MethodSpec`, for the methods whose modules are present (see the module docstring).
METHODS, MISSING_MODULES = _build()


def method_names(family: str | None = None) -> list[str]:
    """Names of the registered methods (of one ``family``), in registry order."""
    if family is not None and family not in FAMILIES:
        raise BadInputError(f"Unknown family {family!r}; choose one of {list(FAMILIES)}.")
    return [k for k, spec in METHODS.items() if family is None or spec.family == family]


def stepped_methods() -> list[str]:
    """Names of the methods whose fit can be stepped one EM iteration at a time."""
    return [k for k, spec in METHODS.items() if spec.stepped]


def make_method(name: str, random_state=None):
    """A fresh, unfitted estimator of the registered method ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`METHODS`.
    random_state : None, int or numpy.random.Generator
        Seed of the method's own randomness (initialisation, imputation draws, network weights).

    Raises
    ------
    BadInputError
        For an unknown name (the message lists the registered ones, and says when the method's
        module is not installed).
    """
    spec = METHODS.get(name) if isinstance(name, str) else None
    if spec is None:
        absent = f" Modules not present in this installation: {', '.join(MISSING_MODULES)}." if MISSING_MODULES else ""
        raise BadInputError(f"Unknown method {name!r}; registered methods: {', '.join(METHODS)}.{absent}")
    return spec.factory(random_state)
