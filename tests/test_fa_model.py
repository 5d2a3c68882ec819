"""FAModel: the fit, masks, encoders and the Neumann series stepped over l (no Panel)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.core.factor import neumann
from explorer.core.validation import BadInputError
from explorer.ui.state.fa_model import MASK_TYPES, METHODS, FAModel, load_images


@pytest.fixture(scope="module")
def model():
    return FAModel(n_eval=40)


@pytest.fixture(scope="module")
def mixture():
    return FAModel(n_eval=30, classes="1,7", n_components=2, n_factors=6, mask="half")


def _dense_conditional_mean(P, x, miss):
    """E[x_m | x_o] of N(mu, W W^T + Psi) by dense Gaussian conditioning (the oracle)."""
    S = P.loadings @ P.loadings.T + np.diag(P.psi)
    o, m = ~miss, miss
    return P.mean[m] + S[np.ix_(m, o)] @ np.linalg.solve(S[np.ix_(o, o)], x[o] - P.mean[o])


def test_exact_encoder_matches_dense_gaussian_conditioning(model):
    R = model.reconstructions()
    for i in range(5):
        miss = model.missing[i]
        expected = _dense_conditional_mean(model.params, model.truth[i], miss)
        np.testing.assert_allclose(R["exact"][i][miss], expected, atol=1e-10)


def test_observed_pixels_are_kept_bit_for_bit_unless_asked(model):
    R = model.reconstructions()
    obs = ~model.missing
    for k in METHODS:
        assert np.array_equal(R[k][obs], model.truth[obs]), k
    model.keep_observed = False
    try:
        R = model.reconstructions()
        assert not np.allclose(R["exact"][obs], model.truth[obs])  # the denoised projection of every pixel
        assert np.array_equal(R["mean"][obs], model.truth[obs])  # MI never changes an observed pixel
    finally:
        model.keep_observed = True


def test_nsa_converges_to_the_exact_solution_and_respects_its_bound(model):
    m = FAModel(n_eval=20, mask="random_pixels", rate=0.4, max_terms=2000)
    exact = neumann.encode_exact(m.params, np.where(m.missing, np.nan, m.truth))
    for l in (0, 5, 40, 200):
        m.n_terms = l
        err = np.linalg.norm(m._state.latent - exact, axis=1)
        assert np.all(err <= m.bound * (1 + 1e-9) + 1e-12), l
    m.n_terms = 1500
    np.testing.assert_allclose(m.reconstructions()["nsa"], m.reconstructions()["exact"], atol=1e-8)
    assert m.residual.max() < 1e-8
    assert np.isclose(m.errors["nsa"], m.errors["exact"], rtol=1e-8)


def test_seek_back_and_forth_gives_the_states_of_plain_stepping():
    a, b = FAModel(n_eval=10), FAModel(n_eval=10)
    a.n_terms = 57
    for _ in range(37):
        b.step()
    a.n_terms = 37  # from the checkpoint at 20
    assert a.iteration == b.iteration == 37
    np.testing.assert_array_equal(a.reconstructions()["nsa"], b.reconstructions()["nsa"])


def test_step_play_protocol_stops_at_max_terms_and_reset_goes_back():
    m = FAModel(n_eval=10, max_terms=5)
    run = m.run_id
    assert m.try_step() and m.iteration == 1 and m.n_terms == 1
    assert m.run() == 4 and m.iteration == 5
    assert m.finished and m.stop_reason == "max_terms"
    assert not m.step() and m.iteration == 5
    assert not m.step(run_id=run - 1)
    m.max_terms = 8
    assert not m.finished and m.step() and m.iteration == 6
    m.reset()
    assert m.iteration == 0 and m.n_terms == 0 and m.run_id == run + 1 and m.stop_reason == ""
    assert [t["n_terms"] for t in m.trace] == list(range(7))  # visited l are kept


@pytest.mark.parametrize("kind", MASK_TYPES)
def test_spectral_radius_is_below_one_and_below_the_universal_bound(model, kind):
    rho = model.rho_by_mask()[kind]
    s = model.scale.max()
    assert rho.shape == (model.n_eval,)
    assert np.all(rho > 0) and np.all(rho <= 1 - 1 / s + 1e-12)
    if kind == "half":  # one pattern: one rho
        assert np.ptp(rho) == 0


def test_blocks_converge_more_slowly_than_random_pixels(model):
    rho = model.rho_by_mask()
    assert rho["random_pixels"].mean() < rho["half"].mean()


def test_decay_curves(model):
    d = model.decay(50)
    assert d["l"].tolist() == list(range(51))
    assert d["mean_rho_l"][0] == d["rho_mean_l"][0] == d["worst"][0] == 1.0
    assert np.all(np.diff(d["mean_rho_l"]) < 0)
    assert np.all(d["worst"] >= d["mean_rho_l"] - 1e-15)  # no mask converges slower than 1 - 1/s
    assert np.all(d["mean_rho_l"] >= d["rho_mean_l"] - 1e-15)  # Jensen: mean of rho^l >= (mean rho)^l


def test_nsa_window_is_where_the_trace_beats_exact():
    m = FAModel(n_eval=30, mask="quarter")
    m.n_terms = 60
    exact = m.errors["exact"]
    inside = {l for a, b in m.nsa_window() for l in range(a, b + 1)}
    for t in m.trace:
        assert (t["nsa"] < exact) == (t["n_terms"] in inside)
    assert inside, "on quarters of the 8x8 digits early-stopped NSA beats the exact solution"
    assert m.trace[-1]["n_terms"] == 60 and np.isfinite([t["nsa"] for t in m.trace]).all()


def test_errors_are_mean_squared_errors_on_missing_pixels(model):
    R, X, miss = model.reconstructions(), model.truth, model.missing
    per_row = model.row_errors()
    i = 3
    assert np.isclose(per_row["fca"][i], np.mean((R["fca"][i] - X[i])[miss[i]] ** 2))
    assert np.isclose(model.errors["sca"], np.nanmean(per_row["sca"]))
    e = model.errors
    assert e["mean"] > e["fca"] > e["exact"]  # the thesis's ordering MI > FCA > exact


def test_brush_toggles_blocks_on_every_image():
    m = FAModel(n_eval=8, mask="random_pixels")
    m.clear_brush()
    assert m.mask == "brush" and not m.missing.any()
    assert np.isnan(m.errors["exact"])  # nothing missing: no error to report
    m.paint(2, 3, size=2)
    block = np.zeros((8, 8), dtype=bool)
    block[2:4, 3:5] = True
    assert np.array_equal(m.missing, np.broadcast_to(block.ravel(), m.missing.shape))
    m.paint(2, 3)  # toggles the clicked pixel back
    assert not m.missing[0].reshape(8, 8)[2, 3] and m.missing[0].reshape(8, 8)[3, 4]
    m.paint(0, 0, value=True)
    assert m.missing[:, 0].all() and np.isfinite(m.errors["exact"])
    with pytest.raises(BadInputError, match=r"Pixel \(9, 0\) is outside the 8 x 8 image"):
        m.paint(9, 0)


def test_painting_starts_from_the_current_mask_of_the_selected_image():
    m = FAModel(n_eval=8, mask="half", image_index=2)
    m.paint(7, 7)
    expected = np.zeros((8, 8), dtype=bool)
    expected[:4] = True
    expected[7, 7] = True
    assert m.mask == "brush" and np.array_equal(m.missing[5], expected.ravel())


def test_mixture_encoders_and_responsibilities(mixture):
    m = mixture
    assert m.is_mixture and m.scale.shape == (2,)
    r = m.responsibilities()
    for k in ("complete", "exact", "nsa"):
        np.testing.assert_allclose(r[k].sum(axis=1), 1.0)
    assert sorted(r["cluster_label"].tolist()) == [1, 7]
    cv = m.component_view(0)
    assert cv["reconstructions"].shape == (2, 64) and np.isclose(cv["exact"].sum(), 1.0)
    m.n_terms = 1500
    try:
        np.testing.assert_allclose(m.responsibilities()["nsa"], r["exact"], atol=1e-6)
        t = m.trace[-1]
        assert t["oracle"] <= t["nsa"] + 1e-12  # the oracle picks the best component per image
    finally:
        m.n_terms = 0


def _complete_responsibilities(m):
    """The complete images' responsibilities and the components' majority digits, computed afresh."""
    from explorer.core.factor import mfa

    train = mfa.responsibilities(m.params, m._data["train"])
    lab = m._data["train_labels"]
    names = np.unique(lab)
    cl = [names[np.argmax([train[lab == c, k].sum() for c in names])] for k in range(m.params.n_components)]
    return mfa.responsibilities(m.params, m.truth), np.array(cl)


def test_complete_responsibilities_are_computed_once_per_fit_and_images():
    m = FAModel(n_eval=20, classes="3,8", n_components=2, n_factors=6, mask="half", side="left")
    first = m.responsibilities()
    m.step()
    m.mask = "quarter"  # neither the fit nor the images change: the same numbers
    r = m.responsibilities()
    assert m._complete_resp[2] is not None and r["complete"] is not m._complete_resp[2]  # a copy is returned
    np.testing.assert_array_equal(r["complete"], first["complete"])
    for change in ({"n_factors": 5}, {"n_eval": 30}, {"n_components": 3}, {"classes": "1,7"}):
        m.param.update(**change)
        r = m.responsibilities()
        complete, cl = _complete_responsibilities(m)
        np.testing.assert_allclose(r["complete"], complete, err_msg=str(change))
        np.testing.assert_array_equal(r["cluster_label"], cl)


def test_a_fit_is_shared_by_models_with_the_same_settings_and_training_rows():
    a, b = FAModel(n_eval=20, n_factors=7, seed=3), FAModel(n_eval=25, n_factors=7, seed=3)
    assert a.params is b.params  # the digits leave 1000 training rows either way: one fit for both
    a.n_factors = 6
    assert a.params is not b.params and a.params.loadings.shape == (64, 6)
    # a small set: n_eval changes the training rows, so the fit differs
    c, d = (FAModel(n_eval=n, classes="3,8", n_factors=6) for n in (20, 60))
    assert c._data["train"].shape[0] != d._data["train"].shape[0] and c.params is not d.params
    assert c.params.mean.shape == (64,)


def test_responsibilities_need_a_mixture(model):
    with pytest.raises(BadInputError, match="need a mixture"):
        model.responsibilities()


def test_bad_settings_give_a_readable_error_and_no_state():
    m = FAModel(n_eval=5)
    m.n_factors = 64
    assert "n_factors=64 must be smaller than the 64 pixels" in m.error
    assert m.finished and not m.step() and m.errors == {}
    m.n_factors = 5
    assert m.error == "" and m.step() and m.iteration >= 1


def test_too_many_evaluation_images_is_an_error():
    with pytest.raises(BadInputError, match="Use fewer evaluation images"):
        load_images("digits_8x8", "1,7", n_eval=360)
    d = load_images("digits_8x8", "1,7", n_train=5000, n_eval=60)
    assert d["train"].shape == (361 - 60, 64)  # all the rest of the 182 + 179 images
    assert set(np.unique(d["eval_labels"])) <= {1, 7}


def test_settings_round_trip():
    a = FAModel(n_eval=12, mask="square", size=3, n_terms=7)
    b = FAModel(n_eval=12)
    b.apply_settings(a.settings())
    assert b.iteration == 7 and b.mask == "square"
    np.testing.assert_array_equal(a.missing, b.missing)
    assert a.errors == b.errors


@pytest.mark.parametrize("n_components", [1, 2])
def test_a_drawing_is_masked_and_inpainted_by_every_encoder(n_components):
    m = FAModel(n_eval=8, mask="half", image_index=2, n_components=n_components, n_factors=6, n_terms=30)
    m.clear_drawing()
    assert m.source == "draw" and m.labels[2] == -1
    assert not m.truth[2].any() and np.array_equal(m.truth[3], m._data["eval"][3])  # only the selected row
    blank = m.reconstructions()
    m.draw(5, 3, size=2)  # bottom half: observed ink
    m.draw(7, 6, value=True)
    canvas = np.zeros((8, 8))
    canvas[5:7, 3:5] = canvas[7, 6] = 1.0
    np.testing.assert_array_equal(m.truth[2], canvas.ravel())
    R, miss = m.reconstructions(), m.missing[2]
    assert miss.reshape(8, 8)[:4].all() and not miss.reshape(8, 8)[4:].any()
    for k in METHODS:
        np.testing.assert_array_equal(R[k][2][~miss], canvas.ravel()[~miss])  # observed pixels kept
        if k != "mean":  # MI ignores the visible pixels; every encoder reads them
            assert not np.allclose(R[k][2][miss], blank[k][2][miss]), k
    np.testing.assert_array_equal(R["mean"][2][miss], blank["mean"][2][miss])
    np.testing.assert_array_equal(R["exact"][3], blank["exact"][3])  # other test images untouched
    assert np.isfinite(m.errors["exact"]) and m.iteration == 30
    m.draw(5, 3)  # toggles: erased
    assert m.truth[2].reshape(8, 8)[5, 3] == 0.0 and m.truth[2].reshape(8, 8)[6, 4] == 1.0
    m.image_index = 4  # the drawing follows the selected image
    np.testing.assert_array_equal(m.truth[4], m.drawing)
    np.testing.assert_array_equal(m.truth[2], m._data["eval"][2])
    m.source = "test"
    np.testing.assert_array_equal(m.truth, m._data["eval"])
    with pytest.raises(BadInputError, match=r"Pixel \(8, 8\) is outside the 8 x 8 image"):
        m.draw(8, 8)


def test_the_drawing_canvas_has_the_image_size_of_the_data_set():
    m = FAModel(n_eval=5, n_train=300, dataset="mnist")
    m.draw(14, 14, size=3)
    assert m.drawing.shape == (784,) and m.drawing.sum() == 9 and m.truth[0].reshape(28, 28)[13:16, 13:16].all()
    m.dataset = "digits_8x8"  # a 28x28 drawing does not fit: a blank 8x8 canvas
    assert m.drawing is None and m.canvas.shape == (64,) and not m.truth[0].any()


def test_photo_patches_fit_quickly_and_inpaint():
    import time
    t0 = time.perf_counter()
    m = FAModel(dataset="photo_patches", n_eval=20, mask="quarter")
    assert time.perf_counter() - t0 < 10  # < 5 s on an idle machine
    assert m.shape == (16, 16) and m.truth.shape == (20, 256) and m.error == ""
    assert m.n_factors == 30 and "PPCA (closed form), q = 30, 1000 training images" in m.fit_info
    R = m.reconstructions()
    for i in range(3):  # the exact encoder is Gaussian conditioning of N(mu, W W' + Psi)
        miss = m.missing[i]
        np.testing.assert_allclose(R["exact"][i][miss], _dense_conditional_mean(m.params, m.truth[i], miss), atol=1e-9)
    e = m.errors
    assert e["exact"] < e["fca"] < e["mean"]
    assert np.all(m.rho < 1)
    gap0 = np.abs(m.reconstructions()["nsa"] - R["exact"]).max()
    m.n_terms = 300  # smooth patches: rho close to 1, the series converges slowly but surely
    assert np.abs(m.reconstructions()["nsa"] - R["exact"]).max() < gap0
    assert m.residual.max() < 1 and m.iteration == 300


def test_a_photo_patch_mixture_is_centred_on_the_training_mean():
    """With PX-EM the page's short mixture fit (12 iterations on 256 pixels) puts the weighted mean of the
    components on the training mean, so mean imputation is the same as for one PPCA (plain EM left it up to
    0.2 away and doubled the MI error)."""
    single = FAModel(dataset="photo_patches", n_eval=20, mask="quarter")
    mix = FAModel(dataset="photo_patches", n_eval=20, mask="quarter", n_components=2)
    assert "mixture of PPCA" in mix.fit_info and mix.error == ""
    P = mix.params
    weighted = np.einsum("k,kd->d", P.weights, P.means)
    np.testing.assert_allclose(weighted, single.params.mean, atol=1e-6)
    assert mix.errors["mean"] == pytest.approx(single.errors["mean"], rel=1e-4)  # reg = 1e-3 shrinks a hair
    assert mix.errors["exact"] < mix.errors["sca"] < mix.errors["mean"]


def test_changing_the_data_set_keeps_a_chosen_q_and_otherwise_takes_its_default():
    m = FAModel(n_eval=5)
    m.dataset = "photo_patches"
    assert m.n_factors == 30 and "q = 30" in m.fit_info
    m.dataset = "digits_8x8"
    assert m.n_factors == 10
    m.n_factors = 12
    m.dataset = "photo_patches"
    assert m.n_factors == 12 and "q = 12" in m.fit_info


def test_a_stroke_inks_many_pixels_in_one_update_and_bad_strokes_are_errors():
    m = FAModel(n_eval=5, mask="half")
    revision = m.revision
    m.draw([4, 5, 6], [1, 2, 3], value=True)
    assert np.flatnonzero(m.truth[0]).tolist() == [4 * 8 + 1, 5 * 8 + 2, 6 * 8 + 3]
    assert m.revision == revision + 1  # one rebuild for the whole stroke
    with pytest.raises(BadInputError, match="equal-length sequences"):
        m.draw([1, 2], [1])
    with pytest.raises(BadInputError, match=r"Pixel \(9, 2\) is outside"):
        m.draw([1, 9], [1, 2])
