"""Continuous batching: requests that come and go (specdec_engine); and
Stream, one generation's pieces from a private engine."""

from __future__ import annotations

import ctypes
import threading
from typing import Callable, Iterator, List, Optional, Sequence, Union

from . import _native
from ._handle import _Handle
from .errors import InvalidArgumentError, Status, check, error_for
from .generation import Tokens, _Source, _token_array
from .types import (
    Completion,
    FinishedEvent,
    GenerateParams,
    Piece,
    RequestTimes,
    StopReason,
    TokenEvent,
    TokenLogprob,
    sequence_stats_from_c,
    top_logprobs_from_c,
)

lib = _native.lib
Event = Union[TokenEvent, FinishedEvent]

_TOKEN = 0
_FINISHED = 1


class Engine(_Handle):
    """An engine over a Session (speculative) or a Context alone (plain
    decoding); see specdec_engine_init for the parameters.

    Threads: step(), run_until_idle(), add() and close() belong to one thread
    at a time (the engine's); cancel() may be called from any thread, also
    while another thread is inside step(): ctypes releases the GIL during the
    native call, so the cancelling thread runs. on_event(event), if given, is
    called on the engine's thread for every event (return False from a
    TokenEvent to stop that request); step() also returns the events."""

    def __init__(
        self,
        source: _Source,
        *,
        n_seq: int = 0,
        max_waiting: int = 64,
        n_prefill_chunk: int = 256,
        keep_finished: bool = False,
        reuse_prompts: bool = True,
        prompt_cache_bytes: int = 0,
        on_event: Optional[Callable[[Event], Optional[bool]]] = None,
    ):
        p = lib.specdec_engine_default_params()
        p.n_seq = n_seq
        p.max_waiting = max_waiting
        p.n_prefill_chunk = n_prefill_chunk
        p.keep_finished = keep_finished
        p.reuse_prompts = reuse_prompts
        p.prompt_cache_bytes = prompt_cache_bytes
        if not isinstance(source, _Source):
            raise TypeError("an Engine runs over a Session or a Context")
        session, target, self._n_draft_max = source._handles()
        self.source = source
        # The callback reaches this state, never the Engine itself, so that an
        # engine nobody references is collected (and freed).
        self._state = _CallbackState(on_event, self._n_draft_max)
        self._callback = _native.specdec_engine_callback(self._state.on_c_event)
        self._lock = threading.Lock()  # held by the thread inside step / run_until_idle
        self._stepping: Optional[int] = None
        out = ctypes.c_void_p()
        check(lib.specdec_engine_init(session, target, ctypes.byref(p), self._callback, None, ctypes.byref(out)))
        self._own(out.value, lib.specdec_engine_free, source)

    @property
    def on_event(self) -> Optional[Callable[[Event], Optional[bool]]]:
        return self._state.on_event

    @on_event.setter
    def on_event(self, fn: Optional[Callable[[Event], Optional[bool]]]) -> None:
        self._state.on_event = fn

    def _enter(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT, "the engine is stepping on another thread (only cancel() may be called from other threads)"
            )
        self._stepping = threading.get_ident()

    def _leave(self) -> None:
        self._stepping = None
        self._lock.release()

    def _check_thread(self) -> None:
        if self._lock.locked() and self._stepping != threading.get_ident():
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT, "the engine is stepping on another thread (only cancel() may be called from other threads)"
            )

    def add(self, prompt: Sequence[int], params: Optional[GenerateParams] = None, **kwargs) -> int:
        """Queues a request; returns its id. Keyword arguments are GenerateParams
        fields. Allowed from on_event (during a step, on the engine's thread)."""
        self._check_thread()
        gp = GenerateParams.of(params, **kwargs)
        c_params, keep = gp.to_c()
        arr = _token_array(prompt)
        rid = _native.specdec_request_id()
        check(lib.specdec_engine_add(self.handle, arr, len(prompt), ctypes.byref(c_params), ctypes.byref(rid)))
        del keep
        return rid.value

    def add_n(self, prompt: Sequence[int], n: int, params: Optional[GenerateParams] = None, **kwargs) -> List[int]:
        """Queues n requests of one prompt, decoded once, request i seeded
        seed + i (specdec_engine_add_n); returns their ids."""
        self._check_thread()
        gp = GenerateParams.of(params, **kwargs)
        c_params, keep = gp.to_c()
        arr = _token_array(prompt)
        first = _native.specdec_request_id()
        check(lib.specdec_engine_add_n(self.handle, arr, len(prompt), ctypes.byref(c_params), n, ctypes.byref(first)))
        del keep
        return [first.value + i for i in range(n)]

    def cancel(self, request_id: int) -> None:
        """Asks a request to stop (any thread); it finishes with StopReason.CANCELLED
        at the start of the next step. Unknown ids raise UnknownRequestError."""
        check(lib.specdec_engine_cancel(self.handle, request_id))

    def pause(self, request_id: int, paused: bool = True) -> None:
        """Holds a request (paused=True: it keeps its slot, nothing of it is decoded or
        emitted) or lets it go on (False); any thread, from the next step. Its output
        is what it would have been unpaused. Unknown ids raise UnknownRequestError."""
        check(lib.specdec_engine_pause(self.handle, request_id, paused))

    def _run(self, fn) -> List[Event]:
        self._enter()
        try:
            handle = self.handle
            status = fn(handle)  # the GIL is released here
            message = lib.specdec_last_error().decode("utf-8", "replace") if status != Status.OK else ""
            events, self._state.events = self._state.events, []
            raised, self._state.raised = self._state.raised, []
        finally:
            self._leave()
        if status != Status.OK:
            raise error_for(status, message, partial=events)
        if raised:
            raise raised[0]
        return events

    def step(self) -> List[Event]:
        """One engine step; returns its events in order (TokenEvent, FinishedEvent).
        A failing step raises with the events it produced in `partial`."""
        return self._run(lib.specdec_engine_step)

    def run_until_idle(self) -> List[Event]:
        """Steps while has_work; returns every event."""
        return self._run(lib.specdec_engine_run_until_idle)

    @property
    def has_work(self) -> bool:
        """Whether a step would do anything: paused requests alone are no work."""
        return bool(lib.specdec_engine_has_work(self.handle))

    def close(self) -> None:
        """Frees the engine; requests still in it end without events."""
        if self.closed:
            return
        self._enter()
        try:
            super().close()
        finally:
            self._leave()


class _CallbackState:
    def __init__(self, on_event, n_draft_max: int):
        self.on_event = on_event
        self.n_draft_max = n_draft_max
        self.events: List[Event] = []
        self.raised: List[BaseException] = []

    def on_c_event(self, ptr, _user) -> bool:
        try:
            event = _event_from_c(ptr.contents, self.n_draft_max)
            self.events.append(event)
            if self.on_event is not None:
                return self.on_event(event) is not False
            return True
        except BaseException as e:  # never into C; raised when the step returns
            self.raised.append(e)
            return False


def _event_from_c(e, n_draft_max: int) -> Event:
    if e.type == _TOKEN:
        piece = ctypes.string_at(e.piece, e.n_piece) if e.n_piece else b""
        top = None
        if e.top_logprobs:
            top = [TokenLogprob(t.token, t.logprob) for t in e.top_logprobs[: e.n_top_logprobs]]
        elif e.logprob:
            top = []
        return TokenEvent(
            id=e.id,
            seq_id=e.seq_id,
            token=e.token,
            piece=piece,
            logprob=e.logprob.contents.logprob if e.logprob else None,
            top_logprobs=top,
        )
    n = e.n_tokens
    tokens = e.tokens[:n] if n else []
    logprobs = e.logprobs[:n] if e.logprobs else None
    if e.top_logprobs:
        top = top_logprobs_from_c(e.top_logprobs, e.n_top_logprobs, n)
    else:
        top = [[] for _ in tokens] if logprobs is not None else None
    completion = Completion(
        tokens=tokens,
        text_bytes=ctypes.string_at(e.text, e.n_text) if e.n_text else b"",
        stop_reason=StopReason(e.stop),
        stats=sequence_stats_from_c(e.stats, n_draft_max),
        logprobs=logprobs,
        top_logprobs=top,
    )
    return FinishedEvent(
        id=e.id,
        seq_id=e.seq_id,
        completion=completion,
        times=RequestTimes(e.times.t_first_token_us, e.times.t_total_us),
        n_prompt_cached=e.n_prompt_cached,
    )


class Stream(Iterator[Piece]):
    """Pieces of one generation as it runs, on the consumer's thread: each
    next() runs steps of a private Engine (over the Session, or the plain
    Context) until a piece is ready. The output is what generate returns for
    the same prompt and parameters."""

    def __init__(self, source: _Source, prompt: Tokens, params, kwargs):
        self._engine = Engine(source, n_seq=1, keep_finished=True, reuse_prompts=False)
        try:
            self._id = self._engine.add(prompt, params, **kwargs)
        except BaseException:
            self._engine.close()
            raise
        self._queue: list = []
        self.result: Optional[Completion] = None
        self.finished = None  # the FinishedEvent, with times and n_prompt_cached

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Piece:
        while not self._queue:
            if self.finished is not None or self._engine.closed:
                self.close()
                raise StopIteration
            for e in self._engine.step():
                if e.id != self._id:
                    continue
                if hasattr(e, "completion"):
                    self.finished = e
                    self.result = e.completion
                else:
                    self._queue.append(Piece(e.token, e.piece, e.seq_id, e.logprob, e.top_logprobs))
        return self._queue.pop(0)

    def close(self) -> None:
        """Stops the generation (its slot is freed) and frees the engine."""
        if not self._engine.closed:
            if self.finished is None:
                self._engine.cancel(self._id)
                for e in self._engine.run_until_idle():
                    if hasattr(e, "completion") and e.id == self._id:
                        self.finished = e
                        self.result = e.completion
            self._engine.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def text(self) -> str:
        """The whole text, after the stream is exhausted."""
        if self.result is None:
            raise InvalidArgumentError(Status.INVALID_ARGUMENT, "the stream has not finished")
        return self.result.text
