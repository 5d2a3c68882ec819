"""Long fits report progress and can be stopped: ``callback``, ``progress`` and Ctrl-C (issue 10).

Oracles: the objectives a callback records are the fit's own trace (``history_``); a fit the callback
stops (or Ctrl-C interrupts) after k iterations is bit for bit the fit with ``max_iter=k``; a fit
with a callback and a progress bar is bit for bit the fit without. Properties: EM's objective never
decreases along the recorded sequence; ``change`` is the per-row difference of successive objectives.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from explorer.core.loop import ConvergenceWarning, FitInterruptedWarning, IterationInfo, LoopMonitor, run_restarts
from explorer.core.mixtures import em_gmm, vb_dpgmm
from explorer.core.validation import BadInputError
from explorer.impute.dp_mixture import DPGMMImputer
from explorer.impute.factor import FactorAnalysisImputer, MFAImputer
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.utils.progress import FitProgress

ESTIMATORS = [
    GaussianMixtureImputer(n_components=2, max_iter=40, random_state=0),
    GaussianMixtureImputer(n_components=2, max_iter=40, prior=None, covariance_type="diag", random_state=0),
    DPGMMImputer(n_components=4, max_iter=30, random_state=0),
    FactorAnalysisImputer(max_iter=60, random_state=0),
    MFAImputer(n_components=2, max_iter=40, random_state=0),
]
IDS = ["gmm", "gmm-ml-diag", "dpgmm", "fa", "mfa"]
EM = [e for e in ESTIMATORS if not isinstance(e, DPGMMImputer)]


def _data(seed=0, n=120, d=4, rate=0.25):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0, 1, (n // 2, d)), rng.normal(3, 1.5, (n - n // 2, d))])
    X[:, 1] += 0.8 * X[:, 0]
    X[rng.random(X.shape) < rate] = np.nan
    X[np.isnan(X).all(axis=1), 0] = 0.5
    return X


def _params(est):
    out = [est.weights_, est.means_]
    for name in ("covariances_", "loadings_", "noise_variance_"):
        if name in vars(est) or name == "covariances_":
            out.append(np.asarray(getattr(est, name)))
    return out


def _objectives(est):
    h = est.history_
    return np.asarray(h["objective"] if "objective" in h else h["log_likelihood"])


def _fit(est, X, **params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = clone(est).set_params(**params).fit(X)
    return fitted, caught


# ---------------------------------------------------------------------------- the callback
@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_recorded_objectives_are_the_fits_trace(est):
    X = _data()
    infos = []
    fitted, _ = _fit(est, X, callback=infos.append)
    assert all(isinstance(i, IterationInfo) for i in infos)
    assert [i.iteration for i in infos] == list(range(1, fitted.n_iter_ + 1))
    assert {i.restart for i in infos} == {0} and {i.max_iter for i in infos} == {est.max_iter}
    trace = _objectives(fitted)
    np.testing.assert_array_equal([i.objective for i in infos], trace[1:])  # the same numbers, not close ones
    elapsed = [i.elapsed for i in infos]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0
    with pytest.raises(AttributeError):  # the record is immutable
        infos[0].objective = 0.0


@pytest.mark.parametrize("est", EM, ids=[i for e, i in zip(ESTIMATORS, IDS) if e in EM])
def test_em_objective_never_decreases_and_change_is_the_per_row_difference(est):
    X = _data(1)
    infos = []
    _fit(est, X, callback=infos.append, tol=0.0)
    obj = np.array([i.objective for i in infos])
    assert obj.size >= 5
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:])), np.diff(obj).min()
    change = np.array([i.change for i in infos[1:]])
    np.testing.assert_allclose(change * X.shape[0], np.diff(obj), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_callback_and_progress_do_not_change_the_fit(est, capsys):
    X = _data(2)
    plain, _ = _fit(est, X)
    seen = []
    watched, _ = _fit(est, X, callback=seen.append, progress=True)
    assert seen and watched.n_iter_ == plain.n_iter_ and watched.stop_reason_ == plain.stop_reason_
    for a, b in zip(_params(plain), _params(watched)):
        np.testing.assert_array_equal(a, b)
    err = capsys.readouterr().err
    assert type(est).__name__ in err and "objective=" in err and f"/{est.max_iter}" in err


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), which=st.sampled_from(range(len(ESTIMATORS))),
       rate=st.floats(0.0, 0.4))
def test_property_a_callback_never_changes_the_parameters(seed, which, rate):
    est = ESTIMATORS[which]
    X = _data(seed, n=60, d=3, rate=rate)
    plain, _ = _fit(est, X, max_iter=8, random_state=seed)
    objectives = []
    watched, _ = _fit(est, X, max_iter=8, random_state=seed, callback=lambda i: objectives.append(i.objective))
    for a, b in zip(_params(plain), _params(watched)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(objectives, _objectives(watched)[1:])


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_stop_iteration_ends_the_fit_cleanly_as_max_iter_would(est):
    X = _data(3)

    def stop_at_4(info):
        if info.iteration == 4:
            raise StopIteration

    stopped, caught = _fit(est, X, callback=stop_at_4, tol=0.0)
    assert stopped.n_iter_ == 4 and stopped.stop_reason_ == "callback" and not stopped.converged_
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]  # the user asked for it
    reference, _ = _fit(est, X, max_iter=4, tol=0.0)
    for a, b in zip(_params(stopped), _params(reference)):
        np.testing.assert_array_equal(a, b)


def test_a_callbacks_return_value_is_ignored():
    X = _data(4)
    plain, _ = _fit(ESTIMATORS[0], X)
    falsy, _ = _fit(ESTIMATORS[0], X, callback=lambda info: False)
    assert falsy.n_iter_ == plain.n_iter_ > 1 and falsy.stop_reason_ == plain.stop_reason_


# ---------------------------------------------------------------------------- Ctrl-C
@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_keyboard_interrupt_keeps_the_best_state_so_far(est):
    X = _data(5)

    def interrupt_at_3(info):
        if info.iteration == 3:
            raise KeyboardInterrupt

    fitted, caught = _fit(est, X, callback=interrupt_at_3, tol=0.0)
    interrupted = [w for w in caught if issubclass(w.category, FitInterruptedWarning)]
    assert len(interrupted) == 1 and "after 3 iteration(s)" in str(interrupted[0].message)
    assert issubclass(FitInterruptedWarning, ConvergenceWarning)
    assert fitted.n_iter_ == 3 and fitted.stop_reason_ == "interrupted" and not fitted.converged_
    assert fitted.history_.sizes["iteration"] == 4  # iterations 0..3
    Xi = fitted.transform(X)
    assert not np.isnan(Xi).any()
    observed = ~np.isnan(X)
    np.testing.assert_array_equal(Xi[observed], X[observed])
    reference, _ = _fit(est, X, max_iter=3, tol=0.0)  # the kept state is iteration 3 itself
    for a, b in zip(_params(fitted), _params(reference)):
        np.testing.assert_array_equal(a, b)


def _interrupting_step(monkeypatch, module, at_call: int):
    """Make ``module.step`` raise KeyboardInterrupt on its ``at_call``-th call (a Ctrl-C inside the maths).

    With ``prior="auto"`` EM also steps while resolving the prior (a one-component fit) before its loop:
    a Ctrl-C there propagates (no iteration of the fit was complete), so the tests use ``prior=None``.
    """
    original, calls = module.step, []

    def step(*args, **kwargs):
        calls.append(1)
        if len(calls) == at_call:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "step", step)


@pytest.mark.parametrize(("est", "module"), [(ESTIMATORS[1], em_gmm), (ESTIMATORS[2], vb_dpgmm)], ids=["gmm-ml", "dpgmm"])
def test_interrupt_inside_a_step_keeps_the_last_complete_iteration(est, module, monkeypatch):
    X = _data(6)
    reference, _ = _fit(est, X, max_iter=4, tol=0.0)
    _interrupting_step(monkeypatch, module, at_call=5)
    with pytest.warns(FitInterruptedWarning, match="after 4 iteration"):
        fitted = clone(est).set_params(tol=0.0).fit(X)
    assert fitted.n_iter_ == 4 and fitted.stop_reason_ == "interrupted"
    for a, b in zip(_params(fitted), _params(reference)):
        np.testing.assert_array_equal(a, b)


def test_interrupt_before_the_first_iteration_propagates_and_leaves_the_estimator_unfitted(monkeypatch):
    _interrupting_step(monkeypatch, em_gmm, at_call=1)
    est = clone(ESTIMATORS[1])  # prior=None: the first step is the loop's (the prior's own fit steps too)
    with pytest.raises(KeyboardInterrupt):
        est.fit(_data(7))
    with pytest.raises(NotFittedError):
        est.transform(_data(7))


def test_interrupt_during_a_later_restart_keeps_the_best_restart():
    X = _data(8)
    infos = []

    def interrupt_in_restart_2(info):
        infos.append(info)
        if info.restart == 1 and info.iteration == 2:
            raise KeyboardInterrupt

    est = GaussianMixtureImputer(n_components=3, init="random", n_init=3, max_iter=30, random_state=1)
    fitted, caught = _fit(est, X, callback=interrupt_in_restart_2)
    assert any(issubclass(w.category, FitInterruptedWarning) for w in caught)
    first = [i for i in infos if i.restart == 0]
    assert {i.n_restarts for i in infos} == {3} and [i.iteration for i in first] == list(range(1, len(first) + 1))
    best = max(first[-1].objective, infos[-1].objective)
    assert fitted.stop_reason_ == "interrupted"
    assert fitted.history_["objective"].values[-1] == best
    assert fitted.n_iter_ == (len(first) if best == first[-1].objective else 2)


# ---------------------------------------------------------------------------- the loop itself
def _toy_loop(callback, n_runs=1, max_iter=10):
    class S:
        def __init__(self, k):
            self.objective, self.iteration = -1.0 / (k + 1), k

    return run_restarts(n_runs=n_runs, start=lambda: S(0), step=lambda s: S(s.iteration + 1),
                        snapshot=lambda s: {"objective": s.objective}, change=lambda a, b: b.objective - a.objective,
                        max_iter=max_iter, tol=0.0, callback=callback)


def test_a_plain_callable_still_receives_states_and_is_not_interruptible():
    seen = []
    with pytest.warns(ConvergenceWarning):
        out = _toy_loop(seen.append)
    assert [s.iteration for s in seen] == list(range(1, 11)) and out.stop_reason == "max_iter"

    def interrupt(state):
        if state.iteration == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # only a LoopMonitor that asks for it catches Ctrl-C
        _toy_loop(interrupt)


def test_a_monitor_receives_infos_and_the_outcome_has_the_truncated_trace():
    class Stop(LoopMonitor):
        interruptible = True

        def __init__(self):
            self.infos = []

        def update(self, info, state):
            self.infos.append(info)
            if info.iteration == 6:
                raise KeyboardInterrupt

    monitor = Stop()
    with pytest.warns(FitInterruptedWarning):
        out = _toy_loop(monitor)
    assert out.stop_reason == "interrupted" and out.state.iteration == 6 and len(out.trace) == 7
    np.testing.assert_allclose([i.change for i in monitor.infos], np.diff([-1 / (k + 1) for k in range(7)]))


# ---------------------------------------------------------------------------- parameters and display
@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_parameters_are_stored_untouched_and_checked_at_fit(est):
    cb = print
    e = clone(est).set_params(callback=cb, progress=True)
    assert e.get_params()["callback"] is cb and e.get_params()["progress"] is True
    assert clone(e).callback is cb
    with pytest.raises(BadInputError, match="callback must be None or a function"):
        clone(est).set_params(callback="print").fit(_data())
    with pytest.raises(BadInputError, match="progress must be True or False"):
        clone(est).set_params(progress="yes").fit(_data())


def test_progress_without_tqdm_prints_plain_lines(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `from tqdm import tqdm` raises ImportError
    with FitProgress(progress=True, name="Demo") as monitor:
        for k in range(1, 4):
            monitor.update(IterationInfo(0, 1, k, 3, -10.0 + k, 0.5, 0.01 * k), None)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("Demo: iteration 1/3, objective=-9") and err[-1].startswith("Demo: iteration 3/3")


def test_progress_bar_shows_restarts(capsys):
    X = _data(9)
    _fit(GaussianMixtureImputer(n_components=2, n_init=2, max_iter=5, random_state=0), X, progress=True)
    err = capsys.readouterr().err
    assert "restart 1/2" in err and "restart 2/2" in err
