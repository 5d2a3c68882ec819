"""The "Mechanism gallery" page's model and its pure frame builder (no browser)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.core.missingness import mar_table as mt
from explorer.core.validation import BadInputError
from explorer.ui.pages.mechanism_gallery import MechanismGalleryView, gallery_frame
from explorer.ui.state.mechanism_gallery_model import MechanismGalleryModel, symmetrised_kl


def test_symmetrised_kl_oracle():
    """eq. 5.1.1 with +1 smoothing, by hand; symmetric, zero for equal counts."""
    p, q = np.array([3.0, 0.0, 1.0]), np.array([0.0, 2.0, 2.0])
    ps, qs = (p + 1) / (p + 1).sum(), (q + 1) / (q + 1).sum()
    want = sum(a * np.log2(a / b) + b * np.log2(b / a) for a, b in zip(ps, qs))
    assert symmetrised_kl(p, q) == pytest.approx(want)
    assert symmetrised_kl(q, p) == pytest.approx(want)
    assert symmetrised_kl(p, p) == 0.0


@pytest.mark.parametrize("family", ["cpt_v", "linear", "logit_vd"])
def test_sampled_mask_follows_the_response_probabilities(family):
    """Empirical P(r = 1 | v, d), pooled over items, within 4 sd of the mean of the model's (V, D) table."""
    model = MechanismGalleryModel(family=family, n_users=3000, n_items=20, seed=1)
    result = model.compute()
    probs = result.response_probs
    assert probs.shape == (5, 20) and np.all((probs >= 0) & (probs <= 1))
    for v in range(5):
        sel = result.codes == v
        expected = probs[v][np.nonzero(sel)[1]].mean()
        got = result.response[sel].mean()
        assert abs(got - expected) < 4 * np.sqrt(expected * (1 - expected) / sel.sum()) + 1e-9, (v, got, expected)
    assert result.true_counts.sum() == 3000 * 20 and result.observed_counts.sum() == result.response.sum()


def test_families_match_their_definitions():
    m = MechanismGalleryModel(family="linear", s=0.25, n_items=3)
    np.testing.assert_allclose(m.response_probs()[:, 0], [0, 0.25, 0.5, 0.75, 1.0])  # thesis, s = 0.25
    m = MechanismGalleryModel(family="logit_vd", item_spread=0.0, n_items=4)
    np.testing.assert_allclose(m.response_probs(), np.repeat(1 / (1 + np.exp(-m.sigma))[:, None], 4, axis=1))
    m = MechanismGalleryModel(family="logit_vd", item_spread=2.0, n_items=3)
    np.testing.assert_allclose(m.omega(), [-2.0, 0.0, 2.0])
    m = MechanismGalleryModel(family="mar_table")
    probs = m.response_probs()  # P(r1 = 1 | x1 = v) by enumeration over x2
    joint = np.array([0.1, 0.1, 0.7, 0.1])
    cells = joint[:, None] * mt.response_table(*m.mar_params)
    assert probs[1, 0] == pytest.approx(cells[2:, 2:].sum() / joint[2:].sum())
    assert probs[0, 1] == pytest.approx(cells[[0, 2]][:, [1, 3]].sum() / joint[[0, 2]].sum())


def test_mcar_gives_a_small_skl_and_a_value_effect_a_large_one():
    mcar = MechanismGalleryModel(family="linear", s=0.0, n_users=2000).compute()
    strong = MechanismGalleryModel(family="linear", s=0.25, n_users=2000).compute()
    assert mcar.skl < 0.01 < 0.3 < strong.skl
    assert "MCAR" in mcar.sentence() and f"{strong.skl:.3f} bits" in strong.sentence()
    assert strong.observed_marginal[4] > strong.true_marginal[4]  # the top value is over-represented


def test_mar_table_family_and_invalid_settings():
    result = MechanismGalleryModel(family="mar_table", n_users=500).compute()
    assert result.codes.shape == (500, 2) and result.values == ("0", "1")
    labels, true, obs = result.variable_marginals()
    assert labels == ["x1 = 0", "x1 = 1", "x2 = 0", "x2 = 1"]
    np.testing.assert_allclose(true.reshape(2, 2).sum(axis=1), 1.0)
    assert true[1] == pytest.approx(result.codes[:, 0].mean())
    assert obs[1] == pytest.approx(result.codes[result.response[:, 0], 0].mean())
    frame = gallery_frame(result)
    assert frame["marginals"][0][:4] == labels
    bad = MechanismGalleryModel(family="mar_table", alpha=0.9)
    assert any("α + β + γ" in p for p in bad.problems())
    with pytest.raises(BadInputError, match="α"):
        bad.compute()


def test_view_switches_family_and_shows_invalid_settings():
    view = MechanismGalleryView(model=MechanismGalleryModel(n_users=100, n_items=10))
    assert view._groups["cpt_v"].visible and not view._groups["logit_vd"].visible
    view.model.family = "logit_vd"
    assert view._groups["logit_vd"].visible and view.result.family == "logit_vd"
    view.model.family = "mar_table"
    view.model.alpha = 0.9
    assert view._alert.visible and "Not a valid setting" in view._alert.object and view.result is None
    view.model.alpha = 0.1
    assert not view._alert.visible and view.result is not None
    copy = MechanismGalleryModel()
    copy.apply_settings(view.model.settings())
    assert copy.settings() == view.model.settings()


def test_view_lives_as_long_as_its_layout():
    """The gallery keeps only a page's sidebar and main: the view must stay alive through them (the model's
    watchers on it are weak), so a setting changed after garbage collection still updates the sentence."""
    import gc

    view = MechanismGalleryView(model=MechanismGalleryModel(n_users=60, n_items=5))
    sidebar, main, model, sentence = view.sidebar, view.main, view.model, view._sentence
    del view
    gc.collect()
    model.family = "logit_vd"
    assert sentence.object.startswith("Under Logit-vd")
    assert sidebar is not None and main is not None


def test_a_setting_change_only_changes_the_figures_data_never_their_models():
    """Issue 19: the four figures are built once; a new family (other categories, other sizes) replaces data,
    ticks, ranges and titles only."""
    import panel as pn
    from bokeh.document import Document

    view = MechanismGalleryView(model=MechanismGalleryModel(n_users=80, n_items=12))
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    figures = [view._plots.bars_fig, view._plots.heat_fig, view._plots.mask_fig, view._plots.marg_fig]
    kinds = {type(m).__name__ for f in figures for m in f.references()}
    count = sum(1 for f in figures for _ in f.renderers)
    for family in ("logit_vd", "mar_table", "linear", "cpt_v"):
        view.model.family = family
        assert sum(1 for f in figures for _ in f.renderers) == count
        frame = gallery_frame(view.result)
        np.testing.assert_allclose(view._plots.bars_source.data["p"], frame["bars"][1])
        assert view._plots.marg_fig.title.text == frame["title"]
        n = len(frame["values"])
        assert view._plots.bars_fig.xaxis[0].major_label_overrides == {i: v for i, v in enumerate(frame["values"])}
        assert len(view._plots.heat_source.data["p"]) == n * frame["n_items"]
    assert {type(m).__name__ for f in figures for m in f.references()} == kinds
