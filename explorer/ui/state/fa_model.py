"""Model object of the factor-analysis pages: a factor model (or a mixture) of images, masked test
images, every encoder, and the scaled Neumann series (NSA / NSA-M) stepped one term at a time.

:class:`FAModel` (param, no Panel) holds the settings of the three pages (Inpainting, Neumann
convergence, Responsibilities) and publishes what they plot:

* **the fit** -- PPCA (closed form) or factor analysis (EM) for ``n_components = 1``, a mixture of
  PPCA / factor analysers (EM, k-means start) for 2 and more, on ``n_train`` complete training
  images; shared by every session of the process (the parameters are read-only), keyed by its
  settings and training rows (the :data:`_FITS_SIZE` most recently used are kept);
* **the evaluation set** -- ``n_eval`` test images masked by ``mask`` (random pixels, a quarter, a
  half, a random square, or the brush the user paints, applied to every image). With
  ``source = "draw"`` the selected image is the user's **drawing** instead (:meth:`FAModel.draw`,
  ink painted on a blank canvas of the image size), masked and encoded like any test image;
* **the encoders** (antypas2023 §1.3-1.6, :mod:`explorer.core.factor.neumann`): ``mean`` (MI), ``fca``,
  ``sca``, ``exact`` and ``nsa`` (the Neumann series after l = ``n_terms`` updates). For a mixture,
  ``exact`` and ``nsa`` are the exact solution mixture and NSA-M (:mod:`explorer.core.factor.mfa_neumann`,
  responsibility-weighted, signs corrected); ``fca`` / ``sca`` apply the single-model encoder in
  every component and weight the components with the exact visible responsibilities, and ``mean``
  fills in the mixture mean :math:`\\sum_k\\pi_k\\mu_k`. The thesis's **oracle** (the component
  closest to the truth) is reported separately as ``oracle`` in the error trace, never as a method;
* **diagnostics** per image: :math:`\\rho(I - A/s)` (for a mixture the largest over the components:
  the slowest one sets the pace), the a-priori bound and the relative residual at the current l;
  the error-against-l trace of every visited l; :math:`\\rho` per image for every mask type.

Stepping follows :class:`~explorer.ui.components.player.StepPlayer`'s protocol (``step``, ``try_step``,
``reset``, ``finished``, ``iteration``, ``stop_reason``, ``run_id``): one step is one more term of
the series. ``n_terms`` is the l the user drags; the model seeks to it (forward by stepping, backward
from a checkpoint kept every :data:`CHECKPOINT` terms). All work happens under a lock, so widget
events on Panel's threads and timer ticks cannot interleave.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections import OrderedDict

import numpy as np
import param

from explorer.core.factor import factor_analysis as fa
from explorer.core.factor import mfa, mfa_neumann, neumann
from explorer.core.missingness import mechanisms
from explorer.core.validation import BadInputError
from explorer.datasets import image_shape, load_dataset
from explorer.ui.state._settings import MAX_SEED, Settings
from explorer.ui.state._stepped import LockedStepping

__all__ = ["CHECKPOINT", "DATASETS", "MASKS", "METHODS", "FAModel", "load_images"]

#: Latent size q a data set starts with (kept when the user has changed q).
DEFAULT_FACTORS = {"digits_8x8": 10, "mnist": 10, "photo_patches": 30}
#: Where the selected image comes from: a test image, or the user's drawing.
SOURCES = ("test", "draw")
INK = 1.0  # value of a painted pixel (pixels are in [0, 1]; 1 is black in the grey colour map)
#: Mask types of the evaluation set ("brush": the painted mask on every image).
MASKS = ("random_pixels", "quarter", "half", "square", "brush")
#: Mask types compared on the Neumann page (histogram of rho per type).
MASK_TYPES = ("random_pixels", "quarter", "half", "square")
#: Encoders, in display order.
METHODS = ("mean", "fca", "sca", "exact", "nsa")
METHOD_LABELS = {"mean": "MI", "fca": "FCA", "sca": "SCA", "exact": "exact", "nsa": "NSA(l)"}
CHECKPOINT = 20
STOP_TOL = 1e-12  # relative residual below which the series has converged (stop_reason "tol")
#: Fits kept for every session (their parameters are read-only): the most recently used last.
_FITS: OrderedDict = OrderedDict()
_FITS_SIZE = 32
_FITS_LOCK = threading.Lock()


# --------------------------------------------------------------------------- image data (pure functions)
DATASETS = ("digits_8x8", "mnist", "photo_patches")
#: Side of the photograph patches (16 x 16 = 256 pixels: the larger inpainting demo).
PATCH = 16
#: Patches cut from the two photographs (training and evaluation rows are drawn from these).
N_PATCHES = 3000
CLASSES = ("all", "1,7", "4,9", "3,8", "5,6")
QUARTERS = ("random", "top-left", "top-right", "bottom-left", "bottom-right")


@functools.lru_cache(maxsize=8)
def _load(dataset: str, classes: str):
    """All images of a data set as read-only ``(X in [0, 1], labels, (h, w))`` (cached read-only data).

    ``classes`` selects digits; it does not apply to ``photo_patches`` (labels: source photograph).
    """
    digits = None if classes == "all" or dataset == "photo_patches" else tuple(int(c) for c in classes.split(","))
    kwargs = {"digits": digits} if dataset == "mnist" and digits else {}  # MNIST filters itself
    if dataset == "photo_patches":
        kwargs = {"patch": PATCH, "n_samples": N_PATCHES, "random_state": 0}
    data, labels = load_dataset(dataset, return_labels=True, **kwargs)
    X = np.asarray(data.values, dtype=float)
    shape = tuple(image_shape(dataset, **({"patch": PATCH} if dataset == "photo_patches" else {})))
    labels = np.asarray(labels) if labels is not None else np.full(X.shape[0], -1)
    if digits is not None:
        keep = np.isin(labels, digits)
        X, labels = X[keep], labels[keep]
    X, labels = np.ascontiguousarray(X), np.ascontiguousarray(labels)
    X.setflags(write=False)
    labels.setflags(write=False)
    return X, labels, shape


def load_images(dataset: str, classes: str = "all", n_train: int = 1000, n_eval: int = 100, seed: int = 0):
    """Split the images of ``dataset`` into training and evaluation rows (seeded shuffle).

    Returns
    -------
    dict with ``train`` (min(n_train, n_images - n_eval), D), ``eval`` (n_eval, D), ``train_labels``,
    ``eval_labels`` and ``shape`` (h, w); pixel values in [0, 1].
    """
    if dataset not in DATASETS or classes not in CLASSES:
        raise BadInputError(f"dataset must be one of {DATASETS} and classes one of {CLASSES}.")
    X, labels, shape = _load(dataset, classes)
    if n_eval + 20 > X.shape[0]:
        raise BadInputError(f"{dataset!r} ({classes}) has {X.shape[0]} images; n_eval = {n_eval} leaves fewer "
                            "than 20 for training. Use fewer evaluation images.")
    n_train = min(n_train, X.shape[0] - n_eval)  # all the rest when fewer images than asked for
    order = np.random.default_rng(seed).permutation(X.shape[0])
    tr, ev = order[:n_train], order[n_train:n_train + n_eval]
    return {"train": X[tr], "eval": X[ev], "train_labels": labels[tr], "eval_labels": labels[ev], "shape": shape}


def _mask(kind: str, X: np.ndarray, shape, rng, *, rate, quarter, side, size) -> np.ndarray:
    if kind == "random_pixels":
        return mechanisms.random_pixels(X, rate, rng=rng, image_shape=shape)
    if kind == "quarter":
        q = None if quarter == "random" else QUARTERS.index(quarter) - 1
        return mechanisms.image_quarter(X, rng=rng, image_shape=shape, quarter=q)
    if kind == "half":
        return mechanisms.image_half(X, rng=rng, image_shape=shape, side=side)
    return mechanisms.image_square(X, rng=rng, image_shape=shape, size=min(size, *shape))


def _row_mse(R: np.ndarray, X: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Per-row mean squared error over the missing pixels (NaN for rows with none), shape (n,)."""
    k = missing.sum(axis=1)
    sse = np.where(missing, (R - X) ** 2, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):  # rows with no missing pixel: NaN on purpose
        return sse / k


def _nanmean(a) -> float:
    a = np.asarray(a, dtype=float)
    return float(np.nan) if np.all(np.isnan(a)) else float(np.nanmean(a))


# ----------------------------------------------------------------------------- the model
class FAModel(LockedStepping, Settings):
    """Factor model of images, masked evaluation images, encoders and the NSA stepped over l.

    Examples
    --------
    >>> m = FAModel(n_factors=10, mask="half")
    >>> m.step(); m.iteration
    True
    1
    >>> sorted(m.errors)
    ['exact', 'fca', 'mean', 'nsa', 'sca']
    """

    dataset = param.Selector(default="digits_8x8", objects=list(DATASETS), doc="Images")
    classes = param.Selector(default="all", objects=list(CLASSES), doc="Digits used (all, or a pair such as the 1s and 7s)")
    n_train = param.Integer(default=1000, bounds=(20, 20000), doc="Complete training images")
    n_eval = param.Integer(default=100, bounds=(1, 2000), doc="Test images encoded")
    kind = param.Selector(default="ppca", objects=list(fa.KINDS), doc="PPCA (isotropic noise) or FA")
    n_factors = param.Integer(default=10, bounds=(1, 400), doc="Latent dimension q")
    n_components = param.Integer(default=1, bounds=(1, 6), doc="1: one factor model; 2+: a mixture")
    seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Train/test split and k-means start")
    mask = param.Selector(default="quarter", objects=list(MASKS), doc="Mask of the test images")
    rate = param.Number(default=0.5, bounds=(0.0, 1.0), doc="Missing fraction (random pixels)")
    quarter = param.Selector(default="random", objects=list(QUARTERS), doc="Quarter removed")
    side = param.Selector(default="top", objects=["top", "bottom", "left", "right"], doc="Half removed")
    size = param.Integer(default=4, bounds=(1, 28), doc="Side of the square removed (pixels)")
    mask_seed = param.Integer(default=0, bounds=(0, MAX_SEED), doc="Seed of the random masks")
    image_index = param.Integer(default=0, bounds=(0, None), doc="Selected test image")
    n_terms = param.Integer(default=0, bounds=(0, 5000), doc="Neumann updates l")
    max_terms = param.Integer(default=200, bounds=(1, 5000), doc="Play stops at this l")
    eps = param.Number(default=1e-6, bounds=(0.0, None), doc="epsilon of the scale s = rho(I + W'Psi^-1 W) + eps")
    keep_observed = param.Boolean(default=True, doc="Paste the observed pixels back into reconstructions")
    brush = param.Array(default=None, allow_None=True, precedence=-1, doc="Painted mask (D,), True = missing")
    source = param.Selector(default="test", objects=list(SOURCES),
                            doc="Selected image: a test image, or the drawing (replaces it)")
    drawing = param.Array(default=None, allow_None=True, precedence=-1, doc="Drawn image (D,) in [0, 1]")

    iteration = param.Integer(default=0, constant=True, precedence=-1, doc="l of the shown NSA state")
    stop_reason = param.String(default="", constant=True, precedence=-1, doc="'', 'tol', 'max_terms'")
    error = param.String(default="", constant=True, precedence=-1, doc="Readable error of the last action")
    run_id = param.Integer(default=0, constant=True, precedence=-1, doc="Increases when the problem changes")
    revision = param.Integer(default=0, constant=True, precedence=-1, doc="Increases when any output changes")
    fit_info = param.String(default="", constant=True, precedence=-1, doc="What was fitted")

    _SETTINGS = ("dataset", "classes", "n_train", "n_eval", "kind", "n_factors", "n_components", "seed", "mask",
                 "rate", "quarter", "side", "size", "mask_seed", "image_index", "n_terms", "max_terms", "source")
    _FIT = ("dataset", "classes", "n_train", "n_eval", "kind", "n_factors", "n_components", "seed")
    _PROBLEM = ("mask", "rate", "quarter", "side", "size", "mask_seed", "brush", "eps", "source", "drawing")

    def __init__(self, **params):
        if "n_factors" not in params:
            params["n_factors"] = DEFAULT_FACTORS[params.get("dataset", self.param.dataset.default)]
        super().__init__(**params)
        self._lock = threading.RLock()
        self._rho_types: dict = {}
        self._quiet = False
        self._busy = False  # refitting: setting changes made by _refit itself are not rebuilt twice
        self._params = self._data = self._state = self._problem = self._missing = self._exact = None
        self._truth = None
        self._complete_resp = None  # (params, images, their responsibilities, cluster labels) of responsibilities()
        self._base, self._base_errors, self._trace, self._checkpoints = {}, {}, {}, {}
        self.param.watch(self._on_fit, list(self._FIT))
        self.param.watch(self._on_problem, list(self._PROBLEM))
        self.param.watch(self._on_terms, ["n_terms", "max_terms"])
        self.param.watch(self._on_view, ["image_index", "keep_observed"])
        self._refit()

    # ------------------------------------------------------------------ properties
    @property
    def lock(self) -> threading.RLock:
        """The lock every action holds; hold it to read several outputs from one consistent state."""
        return self._lock

    @property
    def params(self):
        """The fitted FAParams (one component) or MFAParams (a mixture), or None."""
        return self._params

    @property
    def is_mixture(self) -> bool:
        return isinstance(self._params, mfa.MFAParams)

    @property
    def shape(self) -> tuple:
        """(h, w) of the images."""
        return self._data["shape"] if self._data else (8, 8)

    @property
    def truth(self) -> np.ndarray:
        """The complete evaluation images, (n_eval, D); with ``source = "draw"`` row ``image_index``
        is the drawing."""
        return self._data["eval"] if self._truth is None else self._truth

    @property
    def labels(self) -> np.ndarray:
        """Labels of the evaluation images (-1: none, e.g. the drawing), (n_eval,)."""
        lab = self._data["eval_labels"]
        if self.source == "draw":
            lab = lab.copy()
            lab[self.image_index] = -1
        return lab

    @property
    def canvas(self) -> np.ndarray:
        """The drawing (D,) (a blank canvas, zeros, before anything is drawn)."""
        D = self.shape[0] * self.shape[1]
        return np.zeros(D) if self.drawing is None else np.asarray(self.drawing, dtype=float)

    @property
    def missing(self) -> np.ndarray:
        """Mask of the evaluation images, (n_eval, D), True = missing."""
        return self._missing

    @property
    def finished(self) -> bool:
        return self._state is None or bool(self.stop_reason)

    @property
    def trace(self) -> list:
        """One dict per visited l (sorted): ``n_terms``, ``nsa`` (error on missing pixels),
        ``oracle`` (mixtures; NaN otherwise), ``residual`` (max relative), ``bound`` (max)."""
        return [self._trace[k] for k in sorted(self._trace)]

    # ------------------------------------------------------------------ watchers
    def _on_fit(self, *events):
        if [e.name for e in events] == ["dataset"] and self.n_factors == DEFAULT_FACTORS.get(events[0].old) \
                and self.n_factors != DEFAULT_FACTORS[self.dataset]:
            # q was not changed by the user: the new data set's default q (this watcher refits then)
            self.n_factors = DEFAULT_FACTORS[self.dataset]
            return
        self._refit()

    def _on_problem(self, *events):
        with self._lock:
            if self._params is not None and not self._busy:
                self._rebuild()

    def _on_terms(self, *events):
        if not self._quiet:
            with self._lock:
                self.seek(self.n_terms)

    def _on_view(self, *events):
        if self._busy:
            return
        if self.source == "draw" and any(e.name == "image_index" for e in events) and self._params is not None:
            with self._lock:
                self._rebuild()  # the drawing moves to the selected row
            return
        self._publish()

    def _publish(self, **outputs):
        with param.edit_constant(self):
            self.param.update(**outputs, revision=self.revision + 1)

    def _fail(self, exc: Exception):
        self._params, self._state, self._problem = None, None, None
        self._publish(error=str(exc), stop_reason="", iteration=0, run_id=self.run_id + 1, fit_info="")

    # ------------------------------------------------------------------ fitting
    def _fit_key(self):
        """What a fit depends on: the settings of :attr:`_FIT` and the training rows (their number: the split
        is seeded, and ``n_eval`` leaves fewer than ``n_train`` rows when a data set is small)."""
        settings = tuple(getattr(self, k) for k in self._FIT if k not in ("n_train", "n_eval"))
        return settings + (self._data["train"].shape[0],)

    def _cached_fit(self, key):
        """``(params, description)`` of the fit ``key``: shared by every session (fitted once per process)."""
        with _FITS_LOCK:
            if key in _FITS:
                _FITS.move_to_end(key)
                return _FITS[key]
        fit = self._fit(self._data["train"])  # outside the lock: other sessions' fits go on meanwhile
        with _FITS_LOCK:
            _FITS[key] = fit
            while len(_FITS) > _FITS_SIZE:
                _FITS.popitem(last=False)
        return fit

    def _refit(self):
        with self._lock:
            self._busy = True
            try:
                self._data = load_images(self.dataset, self.classes, self.n_train, self.n_eval, self.seed)
                self._truth = None
                h, w = self._data["shape"]
                self.param.image_index.bounds = (0, self.n_eval - 1)
                fix = {"image_index": min(self.image_index, self.n_eval - 1), "size": min(self.size, h, w)}
                if self.brush is not None and np.shape(self.brush) != (h * w,):
                    fix["brush"] = None
                if self.drawing is not None and np.shape(self.drawing) != (h * w,):
                    fix["drawing"] = None
                self.param.update(**fix)
                self._params, info = self._cached_fit(self._fit_key())
                self._rho_types = {}
                with param.edit_constant(self):
                    self.fit_info = info
                self._busy = False
                self._rebuild()
            except (BadInputError, np.linalg.LinAlgError) as exc:
                self._fail(exc)
            finally:
                self._busy = False

    def _fit(self, X):
        """Fit on complete images: ``(params, description)``."""
        q, K = self.n_factors, self.n_components
        rng = np.random.default_rng(self.seed)
        if q >= X.shape[1]:
            raise BadInputError(f"n_factors={q} must be smaller than the {X.shape[1]} pixels. Use fewer factors.")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fa.ConvergenceWarning)
            if K == 1 and self.kind == "ppca":
                return fa.ppca_closed_form(X, q), f"PPCA (closed form), q = {q}, {X.shape[0]} training images"
            if K == 1:
                r = fa.fit(fa.prepare(X), fa.FAConfig(n_factors=q, kind="fa", tol=1e-4, max_iter=60, min_psi=1e-3), rng)
                return r.state.params, f"factor analysis (EM, {r.n_iter} iterations), q = {q}, {X.shape[0]} training images"
            # 28x28 images: fewer EM iterations keep a mixture fit within seconds (the k-means start is good)
            config = mfa.MFAConfig(n_components=K, n_factors=q, kind=self.kind, tol=1e-4,
                                   max_iter=60 if X.shape[1] <= 100 else 12,
                                   min_psi=1e-3, reg=1e-3)
            r = mfa.fit(fa.prepare(X), config, rng)
        name = "mixture of PPCA" if self.kind == "ppca" else "mixture of factor analysers"
        return r.state.params, f"{name} (EM, {r.n_iter} iterations), K = {K}, q = {q}, {X.shape[0]} training images"

    # ------------------------------------------------------------------ the problem
    def _make_mask(self, kind: str, X: np.ndarray) -> np.ndarray:
        rng = np.random.default_rng(self.mask_seed)
        if kind == "brush":
            b = np.zeros(X.shape[1], dtype=bool) if self.brush is None else np.asarray(self.brush, dtype=bool)
            return np.broadcast_to(b, X.shape).copy()
        return _mask(kind, X, self.shape, rng, rate=self.rate, quarter=self.quarter, side=self.side, size=self.size)

    def _rebuild(self):
        """Mask the evaluation images, run the direct encoders, prepare the NSA; keep l."""
        try:
            X = self._data["eval"]
            if self.source == "draw":
                X = X.copy()
                X[self.image_index] = self.canvas
                X.setflags(write=False)
            self._truth = X
            self._missing = self._make_mask(self.mask, X)
            P, miss = self._params, self._missing
            Xn = np.where(miss, np.nan, X)
            self._base = {}
            if self.is_mixture:
                self._exact = mfa_neumann.encode_exact(P, Xn)
                resp = self._exact.resp
                self._base["mean"] = np.where(miss, P.weights @ P.means, X)
                for name, enc in (("fca", neumann.encode_fca), ("sca", neumann.encode_sca)):
                    R = np.stack([neumann.decode(c, enc(c, Xn)) for c in P.components])
                    self._base[name] = np.einsum("nk,knd->nd", resp, R)
                self._base["exact"] = self._exact.imputation(keep_observed=False)
                self._problem = mfa_neumann.prepare(P, Xn, eps=self.eps)
                self._state = mfa_neumann.init(self._problem)
            else:
                self._base["mean"] = neumann.mean_impute(P, Xn)
                for name, enc in (("fca", neumann.encode_fca), ("sca", neumann.encode_sca),
                                  ("exact", neumann.encode_exact)):
                    self._base[name] = neumann.decode(P, enc(P, Xn))
                self._problem = neumann.prepare(P, Xn, eps=self.eps)
                self._state = neumann.init(self._problem)
            self._checkpoints = {0: self._state}
            self._trace = {}
            self._base_errors = {k: _row_mse(v, X, miss) for k, v in self._base.items()}
            self._record()
            with param.edit_constant(self):
                self.param.update(error="", run_id=self.run_id + 1)
            self.seek(self.n_terms)
        except (BadInputError, np.linalg.LinAlgError) as exc:
            self._fail(exc)

    # ------------------------------------------------------------------ the NSA state
    def _components(self):
        """``[(NeumannProblem, NeumannState)]`` of every component."""
        if self.is_mixture:
            return list(zip(self._problem.components, self._state.components))
        return [(self._problem, self._state)]

    def _nsa_reconstruction(self) -> np.ndarray:
        if self.is_mixture:
            return mfa_neumann.encoding(self._problem, self._state).imputation(keep_observed=False)
        return neumann.decode(self._params, self._state.latent)

    def _record(self):
        """Trace entry of the current state (error on missing pixels, residual, bound)."""
        X, miss = self.truth, self._missing
        l = self._state.n_terms
        if l in self._trace:
            return
        oracle = float("nan")
        if self.is_mixture:
            enc = mfa_neumann.encoding(self._problem, self._state)
            R = enc.imputation(keep_observed=False)
            oracle = _nanmean(_row_mse(enc.oracle_impute(X, keep_observed=False)[0], X, miss))
        else:
            R = neumann.decode(self._params, self._state.latent)
        self._trace[l] = {"n_terms": l, "nsa": _nanmean(_row_mse(R, X, miss)), "oracle": oracle,
                          "residual": float(self.residual.max(initial=0.0)), "bound": float(self.bound.max(initial=0.0))}

    def _advance(self):
        if self.is_mixture:
            self._state = mfa_neumann.step(self._state, self._problem)
        else:
            self._state = neumann.step(self._state, self._problem)
        if self._state.n_terms % CHECKPOINT == 0:
            self._checkpoints[self._state.n_terms] = self._state
        self._record()

    def _stop(self) -> str:
        if self._state.n_terms >= self.max_terms:
            return "max_terms"
        if self._state.n_terms > 0 and self.residual.max(initial=0.0) < STOP_TOL:
            return "tol"
        return ""

    def seek(self, n_terms: int) -> None:
        """Show the NSA state after ``n_terms`` updates (steps forward, or from a checkpoint)."""
        with self._lock:
            if self._state is None:
                return
            if n_terms < self._state.n_terms:
                self._state = self._checkpoints[max(k for k in self._checkpoints if k <= n_terms)]
            while self._state.n_terms < n_terms:
                self._advance()
            self._quiet = True
            try:
                self._publish(iteration=self._state.n_terms, stop_reason=self._stop(), n_terms=self._state.n_terms)
            finally:
                self._quiet = False

    def _step(self) -> bool:  # one more Neumann term (step / try_step / run: LockedStepping)
        if self.finished:
            return False
        self.seek(self._state.n_terms + 1)
        return True

    def reset(self) -> None:
        """Back to l = 0 (the first term)."""
        with self._lock:
            self.seek(0)
            with param.edit_constant(self):
                self.run_id += 1

    # ------------------------------------------------------------------ read-outs
    @property
    def scale(self) -> np.ndarray:
        """s per component, shape (K,)."""
        return np.array([p.scale for p, _ in self._components()])

    @property
    def rho(self) -> np.ndarray:
        """:math:`\\rho(I - A/s)` per evaluation image (largest over components), shape (n_eval,)."""
        return np.max([p.rho for p, _ in self._components()], axis=0)

    @property
    def bound(self) -> np.ndarray:
        """A-priori bound on the latent error at the current l (largest over components), (n_eval,)."""
        return np.max([s.error_bound(p) for p, s in self._components()], axis=0)

    @property
    def residual(self) -> np.ndarray:
        """Relative residual :math:`\\|u - Ay\\|/\\|u\\|` at the current l (largest over components), (n_eval,)."""
        return np.max([s.relative_residual(p) for p, s in self._components()], axis=0)

    def reconstructions(self) -> dict:
        """``{method: (n_eval, D)}`` for :data:`METHODS` (observed pixels pasted back if ``keep_observed``)."""
        out = dict(self._base) | {"nsa": self._nsa_reconstruction()}
        if self.keep_observed:
            out = {k: np.where(self._missing, v, self.truth) for k, v in out.items()}
        return out

    def row_errors(self) -> dict:
        """``{method: (n_eval,)}`` mean squared error on the missing pixels of every image (NaN: none
        missing); empty when there is no fit."""
        if self._state is None:
            return {}
        return self._base_errors | {"nsa": _row_mse(self._nsa_reconstruction(), self.truth, self._missing)}

    @property
    def errors(self) -> dict:
        """``{method: float}`` error on missing pixels averaged over the evaluation images."""
        return {k: _nanmean(v) for k, v in self.row_errors().items()}

    def decay(self, n_max: int | None = None) -> dict:
        """Convergence factors against l = 0..n_max: ``mean_rho_l`` (mean of rho^l), ``rho_mean_l``
        ((mean rho)^l) and ``worst`` ((1 - 1/s)^l, every mask)."""
        ls = np.arange((self.max_terms if n_max is None else n_max) + 1)
        rho = self.rho
        return {"l": ls, "mean_rho_l": (rho[None, :] ** ls[:, None]).mean(axis=1), "rho_mean_l": rho.mean() ** ls,
                "worst": (1.0 - 1.0 / self.scale.max()) ** ls}

    def rho_by_mask(self) -> dict:
        """``{mask type: rho per evaluation image}`` for every type of :data:`MASK_TYPES` (cached per fit)."""
        with self._lock:
            key = (self.n_eval, self.rate, self.quarter, self.side, self.size, self.mask_seed, self.eps)
            if self._rho_types.get("key") != key:
                out = {}
                for kind in MASK_TYPES:
                    Xn = np.where(self._make_mask(kind, self.truth), np.nan, self.truth)
                    comps = [self._params] if not self.is_mixture else self._params.components
                    out[kind] = np.max([neumann.prepare(c, Xn, eps=self.eps).rho for c in comps], axis=0)
                self._rho_types = {"key": key, "rho": out}
            return self._rho_types["rho"]

    def nsa_window(self) -> list:
        """Intervals ``(l0, l1)`` of visited l where NSA's error is below the exact solution's."""
        ex = self.errors["exact"]
        ls = [t["n_terms"] for t in self.trace if t["nsa"] < ex]
        runs, start = [], None
        for a, b in zip(ls, ls[1:] + [None]):
            start = a if start is None else start
            if b != a + 1:
                runs.append((start, a))
                start = None
        return runs

    def component_view(self, row: int) -> dict:
        """Per-component reconstructions of one image (K, D) with exact and NSA-M responsibilities (K,)."""
        if not self.is_mixture:
            R = self.reconstructions()
            return {"reconstructions": R["exact"][row][None], "exact": np.ones(1), "nsa": np.ones(1)}
        enc = mfa_neumann.encoding(self._problem, self._state)
        R = enc.component_imputations() if self.keep_observed else enc.reconstructions()
        return {"reconstructions": R[:, row], "exact": self._exact.resp[row], "nsa": enc.resp[row]}

    def responsibilities(self) -> dict:
        """Responsibilities of the evaluation images (mixtures): ``complete`` (no mask), ``exact`` and
        ``nsa`` (visible pixels), each (n_eval, K), and ``cluster_label`` (K,): the majority training label."""
        if not self.is_mixture:
            raise BadInputError("Responsibilities need a mixture: set n_components to 2 or more.")
        P, X = self._params, self.truth
        cached = self._complete_resp
        if cached is None or cached[0] is not P or cached[1] is not X:  # a new fit or new images (not a new l)
            train_resp = mfa.responsibilities(P, self._data["train"])
            lab = self._data["train_labels"]
            names = np.unique(lab)
            cl = np.array([names[np.argmax([train_resp[lab == c, k].sum() for c in names])]
                           for k in range(P.n_components)])
            cached = self._complete_resp = (P, X, mfa.responsibilities(P, X), cl)
        return {"complete": cached[2].copy(), "exact": self._exact.resp,
                "nsa": mfa_neumann.encoding(self._problem, self._state).resp, "cluster_label": cached[3].copy()}

    # ------------------------------------------------------------------ actions
    def paint(self, row: int, col: int, size: int = 1, value: bool | None = None) -> None:
        """Toggle (or set to ``value``) a ``size`` x ``size`` block of the brush mask at pixel (row, col).

        The brush starts from the selected image's current mask and switches ``mask`` to "brush"
        (applied to every evaluation image).
        """
        h, w = self.shape
        if not (0 <= row < h and 0 <= col < w):
            raise BadInputError(f"Pixel ({row}, {col}) is outside the {h} x {w} image.")
        with self._lock:
            brush = (self._missing[self.image_index] if self.brush is None or self.mask != "brush"
                     else np.asarray(self.brush, dtype=bool)).reshape(h, w).copy()
            r0, c0 = max(0, row - (size - 1) // 2), max(0, col - (size - 1) // 2)
            block = brush[r0:r0 + size, c0:c0 + size]
            block[...] = (not brush[row, col]) if value is None else bool(value)
            self.param.update(mask="brush", brush=brush.ravel())

    def draw(self, row, col, size: int = 1, value: bool | None = None) -> None:
        """Ink (``value`` True), erase (False) or toggle (None) a ``size`` x ``size`` block of the drawing.

        ``row``, ``col``: one pixel, or equal-length sequences of pixels (a stroke: one block each,
        one update; toggling follows the first pixel). Switches ``source`` to "draw": the drawing
        replaces the selected test image and is masked and encoded like it. Ink is :data:`INK`
        (1.0), erased pixels are 0.
        """
        h, w = self.shape
        rows, cols = np.atleast_1d(row).astype(int), np.atleast_1d(col).astype(int)
        if rows.shape != cols.shape or rows.ndim != 1 or rows.size == 0:
            raise BadInputError(f"row and col must be two pixels indices or two equal-length sequences; got "
                                f"shapes {rows.shape} and {cols.shape}.")
        bad = (rows < 0) | (rows >= h) | (cols < 0) | (cols >= w)
        if bad.any():
            i = int(np.argmax(bad))
            raise BadInputError(f"Pixel ({rows[i]}, {cols[i]}) is outside the {h} x {w} image.")
        with self._lock:
            canvas = self.canvas.reshape(h, w).copy()
            ink = (canvas[rows[0], cols[0]] < INK / 2) if value is None else bool(value)
            for r, c in zip(rows, cols):
                r0, c0 = max(0, r - (size - 1) // 2), max(0, c - (size - 1) // 2)
                canvas[r0:r0 + size, c0:c0 + size] = INK if ink else 0.0
            self.param.update(source="draw", drawing=canvas.ravel())

    def clear_drawing(self) -> None:
        """A blank canvas (every pixel 0) as the selected image."""
        self.param.update(source="draw", drawing=np.zeros(self.shape[0] * self.shape[1]))

    def clear_brush(self) -> None:
        """Nothing painted (every pixel observed)."""
        self.param.update(mask="brush", brush=np.zeros(self.shape[0] * self.shape[1], dtype=bool))
