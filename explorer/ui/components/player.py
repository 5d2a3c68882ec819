"""Step / Play / Pause / Reset controller for any number of steppable models.

:class:`StepPlayer` drives models that offer ``step()``, ``try_step()`` (non-blocking: returns
False at once when another step is running), ``reset()`` and a ``finished`` property, e.g.
:class:`~explorer.ui.state.em_model.EMModel`. It is generic, so later pages (variational mixtures,
Neumann solver) can reuse it.

How Play works (see the Panel guide, sections 2.5 and 2.9): Play starts a session-scoped
``pn.state.add_periodic_callback``. Each tick advances every unfinished model by
``steps_per_tick`` steps and then increments :attr:`StepPlayer.frame`, which is what views
watch (so a view redraws once per tick, however many steps the tick made).

Served, the work is split: the timer's callback runs on the event loop and only hands the steps
to the session's compute thread (:class:`~explorer.ui.session.SessionWorker`; numpy releases the GIL
there); when they are done, the page is updated back on the event loop
(:func:`~explorer.ui.session.hand_to_loop`), where the iteration read-out and every view change
together, under the document's lock, so a counter and the plots never disagree and no document is
changed from a thread. A tick that comes while the previous one is still computing is dropped, not
queued (Play then runs slower than asked, and the read-out says so with the real rate). A tick finds
the session's browser gone (a closed tab) and pauses at once: the server stops computing for nobody
and sends nothing to a closed connection. Step clicks go through the same thread. Creating and
stopping the timer is always done on the event loop (handed over the same way), from one reconciling
method, so Play/Pause clicks, the end of a run and the end of the session cannot race; the end of
the session also stops the session's worker.

With no server (Jupyter, scripts, tests) ``tick()`` and ``step()`` work directly. Outside a server
(Jupyter, scripts, tests) the same code runs directly; without a running event loop the timer
never fires and :meth:`StepPlayer.tick` can be called by hand. In Jupyter the timer runs on the
kernel's event loop, and Panel starts the next tick at once when a tick is slower than the period:
there each tick then waits a moment (:data:`NOTEBOOK_PAUSE_S`) so that the kernel still reads the
browser's messages (Pause, other widgets).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque

import panel as pn
import param
from panel.viewable import Viewer

from explorer.ui.session import SessionWorker, current, hand_to_loop, hold, holds_document, served_doc

__all__ = ["NOTEBOOK_PAUSE_S", "StepPlayer"]

#: Seconds the kernel's event loop gets after every tick played in Jupyter (to read Pause and the widgets)
NOTEBOOK_PAUSE_S = 0.02


def _model_label(model, index: int) -> str:
    return getattr(model, "name", None) or f"model {index + 1}"


class StepPlayer(Viewer):
    """Buttons Step, Play/Pause, Reset, a speed control and an iteration read-out.

    Parameters
    ----------
    models : list
        Objects with ``step() -> bool``, ``try_step() -> bool``, ``reset()`` and ``finished``.
        Optional ``iteration``, ``stop_reason`` and ``run_id`` attributes are shown / watched.
    labels : list of str, optional
        Names shown in the iteration read-out (default: the models' ``name``).
    period : int
        Milliseconds between two ticks while playing.
    steps_per_tick : int
        Steps each model makes per tick (views redraw once per tick: a throttle).

    Examples
    --------
    >>> from explorer.ui.state.em_model import EMModel
    >>> player = StepPlayer(models=[EMModel()], labels=["EM"])
    >>> player.step()
    1
    >>> player.models[0].iteration
    1
    """

    models = param.List(default=[], doc="Models with step(), try_step(), reset() and finished")
    labels = param.List(default=None, allow_None=True, item_type=str, doc="Names in the read-out")
    playing = param.Boolean(default=False, doc="True while the timer runs")
    period = param.Integer(default=200, bounds=(20, 5000), doc="Milliseconds between ticks")
    steps_per_tick = param.Integer(default=1, bounds=(1, 50), doc="Steps per model and tick")
    frame = param.Integer(default=0, constant=True, doc="Increases after every batch of steps (views watch it)")

    def __init__(self, **params):
        super().__init__(**params)
        self._tick_lock = threading.Lock()  # a tick in progress makes later ticks skip
        self._timer_lock = threading.RLock()
        self._cb = None  # the PeriodicCallback while playing
        self._doc = None  # the session document the timer belongs to
        self._destroy_registered = False
        self._destroyed = False
        self._worker: SessionWorker | None = None  # the session's compute thread (served only)
        self._inflight = 0  # jobs handed to it and not yet shown
        self._inflight_lock = threading.Lock()  # Step clicks may come from Panel's thread pool
        self._shown_at: deque[float] = deque(maxlen=8)  # when the last played ticks were shown (real rate)
        one = len(self.models) == 1
        self._step_button = pn.widgets.Button(
            label="Step", color="primary", description="One step of the model" if one else "One step of every model")
        self._play = pn.widgets.Toggle.from_param(self.param.playing, label="Play", color="success")
        self._reset_button = pn.widgets.Button(
            label="Reset", color="warning", description="Start the run again" if one else "Start every run again")
        self._period = pn.widgets.IntSlider.from_param(
            self.param.period, label="Tick period (ms)", start=50, end=2000, step=50
        )
        self._per_tick = pn.widgets.IntSlider.from_param(
            self.param.steps_per_tick, label="Steps per tick", start=1, end=25
        )
        self._readout = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        self._step_button.on_click(self._on_step)
        self._reset_button.on_click(self._on_reset)
        for m in self.models:
            if "run_id" in getattr(m, "param", {}):
                m.param.watch(self._on_model_reset, "run_id")
        self._update_readout()
        self._layout = pn.Column(
            pn.Row(self._step_button, self._play, self._reset_button, sizing_mode="stretch_width"),
            self._period, self._per_tick, self._readout, sizing_mode="stretch_width",
        )

    def __panel__(self):
        return self._layout

    # ------------------------------------------------------------------ state
    @property
    def finished(self) -> bool:
        """True when every model is finished (nothing left to play)."""
        return all(bool(m.finished) for m in self.models)

    @property
    def timer(self):
        """The running ``PeriodicCallback`` (None when paused)."""
        return self._cb

    def _label(self, i: int) -> str:
        if self.labels and i < len(self.labels):
            return self.labels[i]
        return _model_label(self.models[i], i)

    def real_rate(self) -> float | None:
        """Ticks per second actually shown while playing (None until two were shown)."""
        times = list(self._shown_at)
        if len(times) < 2 or times[-1] <= times[0]:
            return None
        return (len(times) - 1) / (times[-1] - times[0])

    def _update_readout(self):
        parts = []
        for i, m in enumerate(self.models):
            it = getattr(m, "iteration", None)
            text = f"**{self._label(i)}**: {it if it is not None else '-'}"
            reason = getattr(m, "stop_reason", "")
            if reason:
                text += f" ({'converged' if reason == 'tol' else reason.replace('_', ' ')})"
            parts.append(text)
        text = "Iteration: " + " · ".join(parts) if parts else "No model."
        rate = self.real_rate() if self.playing else None
        asked = 1000.0 / self.period
        if rate is not None and rate < 0.9 * asked:  # say it when Play cannot keep the pace asked for
            text += (f"  \n*Playing at {rate:.1f} ticks/s: each tick takes longer than the "
                     f"{self.period} ms period ({asked:.1f}/s asked).*")
        self._readout.object = text
        label = "Pause" if self.playing else "Play"
        if self._play.label != label:
            self._play.label = label

    def _bump(self):
        with hold():
            self._update_readout()
            with param.edit_constant(self):
                self.frame += 1

    # ------------------------------------------------------------------ actions
    def step(self) -> int:
        """One step of every unfinished model (waits for a running tick). Returns steps made."""
        done = sum(bool(m.step()) for m in self.models if not m.finished)
        self._bump()
        return done

    def tick(self) -> int:
        """One timer tick: ``steps_per_tick`` non-blocking steps per model; skipped when busy.

        Returns the number of steps made (0 when skipped). Pauses once every model is finished.
        """
        if not self._tick_lock.acquire(blocking=False):
            return 0
        try:
            done = 0
            for m in self.models:
                for _ in range(self.steps_per_tick):
                    if m.finished or not m.try_step():
                        break
                    done += 1
            self._bump()
        finally:
            self._tick_lock.release()
        if self.finished and self.playing:
            self.playing = False
        return done

    async def _tick_on_kernel_loop(self) -> int:
        """A tick outside a server (Jupyter): the tick, then the event loop's turn.

        Panel's timer on a bare asyncio loop runs the next tick straight away when a tick is slower
        than the period, without yielding: the kernel would never read the Pause click.
        """
        done = self.tick()
        await asyncio.sleep(NOTEBOOK_PAUSE_S)
        return done

    def reset(self) -> None:
        """Pause and start every model again."""
        self.playing = False
        for m in self.models:
            m.reset()
        self._bump()

    def play(self) -> None:
        self.playing = True

    def pause(self) -> None:
        self.playing = False

    # ------------------------------------------------------------------ widget callbacks
    def _on_step(self, event=None):
        if self._served_doc() is not None:
            self._submit(self._steps_now, played=False)  # the compute thread; shown on the event loop
        else:
            self.step()

    def _steps_now(self) -> int:
        return sum(bool(m.step()) for m in self.models if not m.finished)

    def _play_steps(self) -> int:
        done = 0
        for m in self.models:
            for _ in range(self.steps_per_tick):
                if self._destroyed or not self.playing or m.finished or not m.try_step():
                    break
                done += 1
        return done

    # ------------------------------------------------------------------ served: compute off the loop
    _served_doc = staticmethod(served_doc)  # the session's document, None when not served

    def connected(self) -> bool:
        """False once the session is over or its browser is gone (a closed tab); True when not served."""
        if self._destroyed:
            return False
        doc = self._doc or self._served_doc()
        session = getattr(getattr(doc, "session_context", None), "session", None)
        if session is None:
            return True
        return not session.destroyed and session.connection_count > 0

    def _submit(self, work, played: bool) -> bool:
        """Run ``work()`` (model steps, no UI) on the session's worker, then show it on the event loop."""
        doc = self._served_doc()
        if doc is None or self._destroyed:
            return False
        self._register_destroy()  # the end of the session stops the timer
        worker = self._worker = SessionWorker.of(doc)
        if worker is None:
            return False
        with self._inflight_lock:
            self._inflight += 1
        if not worker.submit(work, lambda result, error: self._shown(played), key=self):
            with self._inflight_lock:
                self._inflight -= 1
            return False
        return True

    def _shown(self, played: bool) -> None:
        """On the event loop, after a job: the read-out and every view change together."""
        with self._inflight_lock:
            self._inflight = max(0, self._inflight - 1)
        if self._destroyed:
            return
        if not self.connected():  # the tab was closed meanwhile: nothing to show, nobody to send it to
            self.playing = False
            return
        if played:
            self._shown_at.append(time.monotonic())
        self._bump()
        if self.finished and self.playing:
            self.playing = False

    async def _served_tick(self) -> None:
        """The timer's callback when served: on the event loop (async, so Panel does not move it to its
        thread pool; it awaits nothing), it hands the steps over, or drops the tick."""
        if not self.playing:  # paused: the timer is being stopped
            return
        if not self.connected():
            self.playing = False  # nobody is watching: stop computing and sending
            return
        if self._inflight:
            return  # the previous tick is still computing: drop this one (no backlog)
        self._submit(self._play_steps, played=True)

    def _on_reset(self, event=None):
        self.reset()

    def _on_model_reset(self, event):
        self._update_readout()

    # ------------------------------------------------------------------ the timer
    @param.depends("playing", "period", watch=True)
    def _request_sync(self):
        self._update_readout()
        # create / stop / retime the timer on the event loop (handed over when called from a thread: a Play or
        # Pause click in Panel's thread pool; through hand_to_loop, which makes the hand-over again until it ran)
        doc = self._served_doc()
        if doc is None or holds_document(doc):
            self._sync_timer()
        elif not hand_to_loop(doc, lambda: self._sync_timer_in(doc)):
            self._stop_timer()  # the session is gone

    def _sync_timer_in(self, doc):
        with current(doc):  # the timer is the session's (see explorer.ui.session.current)
            self._sync_timer()

    def _sync_timer(self):
        """Make the timer match ``playing`` and ``period`` (idempotent, runs on the event loop)."""
        with self._timer_lock:
            want = self.playing and not self._destroyed
            if want and self.finished:  # nothing to do: flip back instead of spinning
                want = False
                self.playing = False
            if not want:
                self._stop_timer()
                return
            if self._cb is not None:
                if self._cb.period != self.period:
                    self._cb.period = self.period
                return
            self._register_destroy()
            served = self._served_doc() is not None
            self._shown_at.clear()
            self._cb = pn.state.add_periodic_callback(self._served_tick if served else self._tick_on_kernel_loop,
                                                      period=self.period, start=True)

    def _stop_timer(self):
        with self._timer_lock:
            cb, self._cb = self._cb, None
            if cb is not None:
                cb.stop()

    def _register_destroy(self):
        doc = pn.state.curdoc
        if self._destroy_registered or doc is None or doc.session_context is None:
            return  # Jupyter / scripts: no session to outlive
        self._destroy_registered = True
        self._doc = doc
        pn.state.on_session_destroyed(self._on_session_destroyed)

    def _on_session_destroyed(self, session_context):
        """Stop for good (the session's worker stops itself; Bokeh may call this twice: idempotent). ``playing``
        becomes False too, without its watchers (they would schedule work on the closed session): the session can
        end before a tick notices the closed tab (a busy server), and Play must not read as playing forever."""
        self._destroyed = True
        self._stop_timer()
        with param.parameterized.discard_events(self):
            self.playing = False
