r"""Discrete data: Bernoulli and categorical mixtures, and the NMAR rating models of marlin2008 (CPT-v, Logit-vd,
DP mixtures, conditional RBMs) with their data container, synthetic world and metrics.

Modules (imported explicitly, nothing here is imported eagerly):

* :mod:`~explorer.core.discrete.bernoulli_mixture`: EM for Bernoulli mixtures with missing entries, optionally
  with a class label (semi-supervised).
* :mod:`~explorer.core.discrete.categorical_mixture`: Bayesian finite multinomial (categorical) mixture with
  MAR missing data, fitted by MAP-EM.
* :mod:`~explorer.core.discrete.cpt_v`: MM/CPT-v: a finite multinomial mixture with the CPT-v NMAR selection
  model, by MAP-EM (Marlin 2008, Section 5.4).
* :mod:`~explorer.core.discrete.crbm`: Conditional RBMs for missing ratings, trained by contrastive divergence
  (Marlin 2008, Section 5.7).
* :mod:`~explorer.core.discrete.dp_cpt_v`: DP mixture of multinomials with the CPT-v selection model: the
  exact auxiliary-variable Gibbs sampler of Marlin (2008) section 5.5 (digest section 4.2), corrected per
  Appendix A.
* :mod:`~explorer.core.discrete.dp_multinomial`: Dirichlet-process multinomial mixture with MAR missing data:
  the collapsed Gibbs sampler.
* :mod:`~explorer.core.discrete.logit_vd`: MM/Logit-vd: a finite multinomial mixture with the Logit-vd NMAR
  selection model, by generalised EM (Marlin 2008, Section 5.6; digest section 4.3).
* :mod:`~explorer.core.discrete.rating_metrics`: Rating-prediction metrics of Marlin chapter 5: NMAE (with an
  explicit normaliser) and NDCG (eq. 5.8.1).
* :mod:`~explorer.core.discrete.rating_world`: A synthetic rating world with a known NMAR selection mechanism,
  and the Marlin chapter-5 protocol.
* :mod:`~explorer.core.discrete.ratings_data`: Categorical data with a response indicator and an availability
  indicator (Marlin ch. 4-5).
"""

__all__ = ["bernoulli_mixture", "categorical_mixture", "cpt_v", "crbm", "dp_cpt_v", "dp_multinomial", "logit_vd",
           "rating_metrics", "rating_world", "ratings_data"]
