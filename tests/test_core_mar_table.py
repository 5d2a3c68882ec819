"""explorer.core.missingness.mar_table: Table 3.1 MAR mechanism, the factorised estimate, the full-joint EM
(Marlin Sec. 3.4)."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from explorer.core.missingness import mar_table as mt
from explorer.core.validation import BadInputError

JOINT = (0.1, 0.1, 0.7, 0.1)


def _params(t: int, lam: float = 0.2):
    return (0.1, 0.1 + 0.05 * t, 0.2, 0.1, lam)


def test_response_table_rows_sum_to_one_and_follow_table_31():
    table = mt.response_table(0.1, 0.15, 0.2, 0.05, 0.3)
    assert table.shape == (4, 4)
    np.testing.assert_allclose(table.sum(axis=1), 1.0)
    assert np.all(table[:, 0] == 0.1)  # r = 00: alpha for every x
    assert table[0, 1] == table[2, 1] == 0.15 and table[1, 1] == table[3, 1] == 0.05  # r = 01: by x2
    assert table[0, 2] == table[1, 2] == 0.2 and table[2, 2] == table[3, 2] == 0.3  # r = 10: by x1


def test_mar_symmetry_by_enumeration():
    """Every valid Table 3.1 is MAR (P(r | x) constant over the x that agree on the observed part), and an
    arbitrary P(r | x) generally is not."""
    rng = np.random.default_rng(0)
    n_valid = 0
    for _ in range(300):
        p = rng.uniform(0, 0.5, size=5)
        if not mt.is_valid(*p):
            continue
        n_valid += 1
        assert mt.is_mar(mt.response_table(*p)), p
    assert n_valid > 50
    table = mt.response_table(*_params(3))
    broken = table.copy()
    broken[1, 2] += 0.05  # r = 10 (x1 observed): x = 00 and 01 agree on x1 but now differ
    broken[1, 3] -= 0.05
    assert ("10", "00", "01") in mt.mar_violations(broken)
    assert not mt.is_mar(rng.dirichlet(np.ones(4), size=4))


@pytest.mark.parametrize("params, culprit", [
    ((0.5, 0.3, 0.3, 0.1, 0.1), "α + β + γ"),
    ((0.1, 0.1, 0.2, 0.5, 0.5), "α + δ + λ"),
    ((-0.1, 0.1, 0.2, 0.1, 0.2), "α = -0.1 must be in [0, 1]"),
    ((0.1, 0.1, 0.2, 0.1, np.nan), "λ = nan must be in [0, 1]"),
])
def test_invalid_parameters_raise_naming_the_inequality(params, culprit):
    assert not mt.is_valid(*params)
    assert any(culprit in v for v in mt.violations(*params))
    with pytest.raises(BadInputError, match=re.escape(culprit)):
        mt.response_table(*params)
    with pytest.raises(BadInputError):
        mt.sample(10, JOINT, params, rng=np.random.default_rng(0))


def test_bad_inputs():
    rng = np.random.default_rng(0)
    with pytest.raises(BadInputError, match="summing to 1"):
        mt.sample(10, (0.5, 0.5, 0.5, 0.5), _params(1), rng=rng)
    with pytest.raises(BadInputError, match="5 numbers"):
        mt.sample(10, JOINT, (0.1, 0.2), rng=rng)
    with pytest.raises(BadInputError, match="Generator"):
        mt.sample(10, JOINT, _params(1), rng=0)
    with pytest.raises(BadInputError, match="binary"):
        mt.counts(np.full((3, 2), 2), np.ones((3, 2), bool))
    with pytest.raises(BadInputError, match=r"\(n, 2\) holding only 0/1"):
        mt.mar_table_2d(np.zeros((3, 3)), rng=rng)
    with pytest.raises(BadInputError, match="init"):
        mt.MARTableEMConfig(init="kmeans")


def test_closed_form_matches_enumeration_and_thesis_column():
    published = (0.7961, 0.7917, 0.7868, 0.7812, 0.7750, 0.7679, 0.7596, 0.7500, 0.7386, 0.7250)
    for t, want in zip(range(1, 11), published):
        cf = mt.p_x1_given_r1(JOINT, _params(t))
        assert cf == pytest.approx(mt.p_x1_given_r1_enumerated(JOINT, _params(t)), abs=1e-12)
        assert cf == pytest.approx(want, abs=6e-5)


def test_closed_form_equals_c_plus_d_iff_beta_equals_delta():
    rng = np.random.default_rng(1)
    for _ in range(50):
        joint = rng.dirichlet(np.ones(4))
        joint = np.where(joint < 0.02, 0.02, joint)
        joint /= joint.sum()
        a, g, d, lam = rng.uniform(0.0, 0.25, size=4)
        same = mt.p_x1_given_r1(joint, (a, d, g, d, lam))
        assert same == pytest.approx(joint[2] + joint[3], abs=1e-12)
        other = mt.p_x1_given_r1(joint, (a, d + 0.1, g, d, lam))
        # beta != delta: biased unless c d-weights cancel, i.e. unless c (b + d) == d (a + c) ... generic data: biased
        assert abs(other - (joint[2] + joint[3])) > 1e-6


def test_sample_and_cells_agree_with_the_table():
    """Empirical P(x, r) of sample() and of sample_cells() are within sampling error of P(x) P(r | x)."""
    rng = np.random.default_rng(2)
    n = 200_000
    probs = np.asarray(JOINT)[:, None] * mt.response_table(*_params(6))
    x, r = mt.sample(n, JOINT, _params(6), rng=rng)
    assert x.dtype == np.int64 and r.dtype == bool and x.shape == r.shape == (n, 2)
    sd = np.sqrt(probs * (1 - probs) / n)
    assert np.all(np.abs(mt.cell_counts(x, r) / n - probs) < 5 * sd + 1e-12)
    cells = mt.sample_cells(n, JOINT, _params(6), rng=rng, size=3)
    assert cells.shape == (3, 4, 4) and np.all(cells.sum(axis=(1, 2)) == n)
    assert np.all(np.abs(cells / n - probs) < 5 * sd + 1e-12)
    missing = mt.mar_table_2d(x.astype(float), rng=rng, **dict(zip(mt.PARAM_NAMES, _params(6))))
    assert np.all(np.abs(mt.cell_counts(x, ~missing) / n - probs) < 5 * sd + 1e-12)


def test_counts_from_cases_equal_counts_from_cells():
    rng = np.random.default_rng(3)
    x, r = mt.sample(500, JOINT, _params(4), rng=rng)
    c = mt.counts(x, r)
    both = r.all(axis=1)
    assert c.c0 == int((~r).all(axis=1).sum())
    for i, j in itertools.product((0, 1), repeat=2):
        assert c.c1[i, j] == int((both & (x[:, 0] == i) & (x[:, 1] == j)).sum())
    assert np.array_equal(c.c2, [int((r[:, 0] & ~r[:, 1] & (x[:, 0] == v)).sum()) for v in (0, 1)])
    assert np.array_equal(c.c3, [int((~r[:, 0] & r[:, 1] & (x[:, 1] == v)).sum()) for v in (0, 1)])
    assert c.n == 500
    theta = mt.factorised_estimate(c)
    assert theta[1, 0] == pytest.approx(x[r[:, 0], 0].mean())  # eq. 3.4.2, d = 1
    assert theta[1, 1] == pytest.approx(x[r[:, 1], 1].mean())
    np.testing.assert_allclose(theta.sum(axis=0), 1.0)


def test_em_objective_never_decreases_and_phi_stays_a_distribution():
    rng = np.random.default_rng(4)
    for _ in range(20):
        cells = rng.integers(0, 30, size=(4, 4))
        data = mt.counts_from_cells(cells)
        state = mt.init(data, mt.MARTableEMConfig(init="random"), rng)
        for _ in range(60):
            new = mt.step(state, data)
            assert new.objective >= state.objective - 1e-9 * max(1.0, abs(state.objective))
            assert new.phi.sum() == pytest.approx(1.0) and np.all(new.phi >= 0)
            state = new


def test_em_fixed_point_is_the_ml_estimate_and_complete_data_gives_frequencies():
    """With nothing missing, one step gives the frequencies; on incomplete data the fixed point's gradient of
    the log-likelihood (on the simplex) vanishes."""
    cells = np.zeros((4, 4))
    cells[:, 3] = [10, 20, 30, 40]
    data = mt.counts_from_cells(cells)
    state = mt.step(mt.init(data), data)
    np.testing.assert_allclose(state.phi.reshape(-1), [0.1, 0.2, 0.3, 0.4])
    rng = np.random.default_rng(5)
    data = mt.counts_from_cells(mt.sample_cells(3000, JOINT, _params(8), rng=rng))
    phi = mt.fit(data).state.phi
    eps = 1e-6
    for k, m in itertools.permutations(range(4), 2):  # move mass between two cells: no first-order gain
        d = np.zeros(4)
        d[k], d[m] = eps, -eps
        gain = mt.log_likelihood(phi + d.reshape(2, 2), data) - mt.log_likelihood(phi, data)
        assert gain < 1e-6


def test_table_33_em_unbiased_factorised_converges_to_closed_form():
    """Table 3.3 at t = 2, 6, 10, small repeats: EM within 3 s.e. of 0.8, factorised within 3 s.e. of the closed
    form, and the factorised bias at t = 10 is many s.e. away from 0.8 (vectorised over repeats)."""
    rng = np.random.default_rng(6)
    for t in (2, 6, 10):
        cells = mt.sample_cells(5000, JOINT, _params(t), rng=rng, size=40)
        data = mt.counts_from_cells(cells)
        em = mt.fit(data).state.p_x1
        fact = mt.factorised_estimate(data)[:, 1, 0]
        se_em, se_f = em.std(ddof=1) / np.sqrt(40), fact.std(ddof=1) / np.sqrt(40)
        assert abs(em.mean() - 0.8) < 3 * se_em, (t, em.mean(), se_em)
        assert abs(fact.mean() - mt.p_x1_given_r1(JOINT, _params(t))) < 3 * se_f, (t, fact.mean(), se_f)
    assert 0.8 - fact.mean() > 20 * se_f


def test_batched_fit_equals_one_by_one():
    rng = np.random.default_rng(7)
    cells = mt.sample_cells(800, JOINT, _params(5), rng=rng, size=(2, 3))
    batched = mt.fit(mt.counts_from_cells(cells), mt.MARTableEMConfig(tol=1e-14)).state.p_x1
    for i, j in itertools.product(range(2), range(3)):
        single = mt.fit(mt.counts_from_cells(cells[i, j]), mt.MARTableEMConfig(tol=1e-14)).state.p_x1
        assert batched[i, j] == pytest.approx(float(single), abs=1e-6)
