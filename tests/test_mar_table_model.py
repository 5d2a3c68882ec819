"""The "MAR is not enough" page's model and its pure view builders (no browser)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.core.missingness import mar_table as mt
from explorer.ui.pages.mar_not_enough import MARTableView, sweep_frame, table_html, validity_markdown
from explorer.ui.state.mar_table_model import MARTableModel


def _small(**kw):
    return MARTableModel(n_cases=1000, repeats=8, n_points=5, **kw)


def test_default_setting_is_table_33_and_the_sweep_covers_the_valid_betas():
    model = _small()
    result = model.compute()
    assert result.valid and result.problems == ()
    assert result.closed_form == pytest.approx(0.775)  # Table 3.3 at 10(beta - delta) = 2.5
    s = result.sweep
    lo, hi = model.beta_range()
    assert (lo, hi) == pytest.approx((0.0, 0.7))
    assert s.grid_x[0] == pytest.approx(lo - model.delta) and s.grid_x[-1] == pytest.approx(hi - model.delta)
    assert s.x[s.current] == pytest.approx(model.beta - model.delta)
    assert s.x.size == 5  # beta = 0.35 is one of the five sweep points
    assert _small(beta=0.3).compute().sweep.x.size == 6  # five sweep points and the current beta
    closed = [mt.p_x1_given_r1(model.joint, (model.alpha, b + model.delta, model.gamma, model.delta, model.lam))
              for b in s.grid_x]
    np.testing.assert_allclose(s.closed, closed)
    assert s.truth == pytest.approx(0.8)


def test_simulated_points_follow_the_closed_form_and_the_truth():
    """The page's vectorised simulation: factorised means within 4 s.e. of the closed form, EM within 4 s.e. of
    c + d, at every point (8 x 1000 cases each)."""
    result = _small(seed=3).compute()
    s = result.sweep
    closed_at = np.interp(s.x, s.grid_x, s.closed)
    assert np.all(np.abs(s.fact_mean - closed_at) < 4 * s.fact_se + 1e-9)
    assert np.all(np.abs(s.em_mean - s.truth) < 4 * s.em_se + 1e-9)


def test_invalid_settings_name_the_failed_condition_and_compute_no_sweep():
    model = _small(alpha=0.6)
    result = model.compute()
    assert not result.valid and result.sweep is None
    assert any("α + β + γ" in p for p in result.problems)
    assert "α + β + γ" in validity_markdown(result) and "Not a valid setting" in validity_markdown(result)
    assert "background:#f8d7da" in table_html(result)  # the negative r = 11 entry is red
    assert sweep_frame(result)["em"][0].size == 0
    assert "No estimate" in result.sentence()
    model = _small(c=0.9)
    assert any("a + b + c + d = 1.2" in p for p in model.problems())
    model.normalise()
    assert sum(model.joint) == pytest.approx(1.0) and model.problems() == []


def test_sentence_is_computed_from_the_numbers():
    result = _small().compute()
    text = result.sentence()
    s = result.sweep
    assert f"{result.closed_form - s.truth:+.4f}" in text  # the bias -0.0250
    assert f"{s.fact_mean[s.current]:.4f}" in text and f"{s.em_mean[s.current]:.4f}" in text
    mcar = _small(beta=0.1).compute()
    assert "x2 is MCAR" in mcar.sentence() and "unbiased" in mcar.sentence()


def test_settings_round_trip_and_bounds():
    model = _small(beta=0.25, seed=7)
    copy = MARTableModel()
    copy.apply_settings(model.settings())
    assert copy.settings() == model.settings()
    with pytest.raises(ValueError):
        MARTableModel(alpha=1.5)


def test_view_updates_when_a_setting_changes():
    view = MARTableView(model=_small())
    assert view._validity.alert_type == "success"
    first = view.result.sweep.fact_mean.copy()
    view.model.beta = 0.5
    assert view.result.sweep.x[view.result.sweep.current] == pytest.approx(0.4)
    assert not np.array_equal(view.result.sweep.fact_mean, first)
    view.model.lam = 0.9
    assert view._validity.alert_type == "danger" and "α + β + λ" in view._validity.object
    assert view.url_bindings()[0][1]["beta"] == "beta"


def test_view_lives_as_long_as_its_layout():
    """The gallery keeps only a page's sidebar and main: the view must stay alive through them (the model's
    watchers on it are weak), so a setting changed after garbage collection still updates the page."""
    import gc

    view = MARTableView(model=_small())
    sidebar, main, model, alert = view.sidebar, view.main, view.model, view._validity
    del view
    gc.collect()
    model.alpha = 0.9
    assert alert.alert_type == "danger"
    assert sidebar is not None and main is not None


def test_results_are_shared_between_sessions_for_the_same_settings_and_read_only():
    from explorer.ui.state.mar_table_model import MARTableModel

    a, b = MARTableModel(seed=3, n_points=4, repeats=3), MARTableModel(seed=3, n_points=4, repeats=3)
    ra = a.compute()
    assert b.compute() is ra  # computed once per process for these settings
    assert not ra.table.flags.writeable and not ra.sweep.em_mean.flags.writeable
    b.seed = 4
    rb = b.compute()
    assert rb is not ra and not np.array_equal(rb.sweep.em_mean, ra.sweep.em_mean)  # another seed, other draws


def test_a_setting_change_only_changes_the_plots_data_never_its_models():
    """Issue 19: the plot is built once; a new setting replaces its sources' data, ranges and title."""
    import panel as pn
    from bokeh.document import Document

    view = MARTableView(model=_small())
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    in_figure = {m.id for m in view._sweep.figure.references()}
    view.model.beta = 0.5
    view.model.lam = 0.9  # not valid: nothing to draw, same models
    view.model.lam = 0.1
    assert {m.id for m in view._sweep.figure.references()} == in_figure
    s = view.result.sweep
    np.testing.assert_allclose(view._sweep.sources["em"].data["y"], s.em_mean)
    np.testing.assert_allclose(view._sweep.sources["fact"].data["hi"], s.fact_mean + s.fact_se)
    assert view._sweep.figure.title.text == sweep_frame(view.result)["title"]
    assert view._sweep.x_range.start == pytest.approx(sweep_frame(view.result)["xlim"][0])
