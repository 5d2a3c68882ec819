"""Numerical core of explorer (layer L0): numpy and scipy only.

The modules are grouped by family, one sub-package each (see ``docs/ARCHITECTURE.md``):

* :mod:`explorer.core.gaussians`: Gaussians observed on a subset of coordinates, conditionals, patterns;
* :mod:`explorer.core.mixtures`: Gaussian mixtures (EM, the variational DP mixture), their prior, the E-step
  engine and the pattern tree;
* :mod:`explorer.core.factor`: factor analysis, mixtures of factor analysers, the Neumann series;
* :mod:`explorer.core.missingness`: missingness mechanisms, masks, MAR-is-not-enough, NMAR sensitivity;
* :mod:`explorer.core.discrete`: categorical / Bernoulli mixtures and the NMAR rating models;
* :mod:`explorer.core.classifiers`: classifiers and kernels for inputs with missing features;
* ``explorer.core._compiled``: the numba kernels, the only place numba is imported.

The modules every family shares sit here: :mod:`~explorer.core.data` (the incomplete-data container),
:mod:`~explorer.core.validation` (input checks and errors), :mod:`~explorer.core.loop` (the ``fit`` loop),
:mod:`~explorer.core.metrics`, :mod:`~explorer.core.rubin` and :mod:`~explorer.core.deprecation`.

Submodules are imported explicitly (``from explorer.core.mixtures.em_gmm import fit``); nothing is
imported eagerly here, so ``import explorer.core`` costs almost nothing and never pulls in
pandas, xarray, param, Panel, HoloViews, Bokeh, scikit-learn or matplotlib
(``tests/test_architecture.py`` enforces this). See ``docs/ARCHITECTURE.md`` for the layers and
conventions (``missing`` is True where a value is missing; randomness comes from an injected
``numpy.random.Generator``; no explicit matrix inverses).
"""

from explorer.core.deprecation import moved_modules

# the flat layout of the previous release: old paths warn and give the module at its new path
moved_modules({
    "explorer.core._kernels": "explorer.core._compiled.gmm",
    "explorer.core._kernels_dp": "explorer.core._compiled.dp_multinomial",
    "explorer.core._kernels_fa": "explorer.core._compiled.factor",
    "explorer.core._kernels_vb": "explorer.core._compiled.vb_dpgmm",
    "explorer.core.gaussian": "explorer.core.gaussians.gaussian",
    "explorer.core.conditional": "explorer.core.gaussians.conditional",
    "explorer.core.conditional_t": "explorer.core.gaussians.conditional_t",
    "explorer.core.patterns": "explorer.core.gaussians.patterns",
    "explorer.core.mixture_regression": "explorer.core.gaussians.mixture_regression",
    "explorer.core.em_gmm": "explorer.core.mixtures.em_gmm",
    "explorer.core.suffstats": "explorer.core.mixtures.suffstats",
    "explorer.core.pattern_tree": "explorer.core.mixtures.pattern_tree",
    "explorer.core.vb_dpgmm": "explorer.core.mixtures.vb_dpgmm",
    "explorer.core.kmeans": "explorer.core.mixtures.kmeans",
    "explorer.core.gaussian_selection": "explorer.core.mixtures.gaussian_selection",
    "explorer.core.factor_analysis": "explorer.core.factor.factor_analysis",
    "explorer.core.fa_conditional": "explorer.core.factor.fa_conditional",
    "explorer.core.mfa": "explorer.core.factor.mfa",
    "explorer.core.mfa_neumann": "explorer.core.factor.mfa_neumann",
    "explorer.core.neumann": "explorer.core.factor.neumann",
    "explorer.core.mechanisms": "explorer.core.missingness.mechanisms",
    "explorer.core.tabular_mechanisms": "explorer.core.missingness.tabular_mechanisms",
    "explorer.core.image_masks": "explorer.core.missingness.image_masks",
    "explorer.core._mask_helpers": "explorer.core.missingness.mask_helpers",
    "explorer.core.mar_table": "explorer.core.missingness.mar_table",
    "explorer.core.sensitivity": "explorer.core.missingness.sensitivity",
    "explorer.core.bernoulli_mixture": "explorer.core.discrete.bernoulli_mixture",
    "explorer.core.categorical_mixture": "explorer.core.discrete.categorical_mixture",
    "explorer.core.cpt_v": "explorer.core.discrete.cpt_v",
    "explorer.core.dp_cpt_v": "explorer.core.discrete.dp_cpt_v",
    "explorer.core.dp_multinomial": "explorer.core.discrete.dp_multinomial",
    "explorer.core.logit_vd": "explorer.core.discrete.logit_vd",
    "explorer.core.crbm": "explorer.core.discrete.crbm",
    "explorer.core.rating_metrics": "explorer.core.discrete.rating_metrics",
    "explorer.core.rating_world": "explorer.core.discrete.rating_world",
    "explorer.core.ratings_data": "explorer.core.discrete.ratings_data",
    "explorer.core.discriminant": "explorer.core.classifiers.discriminant",
    "explorer.core.lda_fa": "explorer.core.classifiers.lda_fa",
    "explorer.core.joint_mixture": "explorer.core.classifiers.joint_mixture",
    "explorer.core.missing_kernels": "explorer.core.classifiers.missing_kernels",
    "explorer.core.synthetic_classification": "explorer.core.classifiers.synthetic_classification",
    "explorer.core._validation": "explorer.core.validation",
    "explorer.core._loop": "explorer.core.loop",
})
