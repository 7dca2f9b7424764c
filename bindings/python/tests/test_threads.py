"""The GIL is released during native calls, so another Python thread runs
while one decodes, and an engine request can be cancelled from another
thread while a step runs, or paused from one."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import fixture_path

import specdec


def test_other_threads_run_during_a_native_call():
    """A plain generate without callbacks is one native call of a few hundred
    milliseconds; with the GIL held, this thread could not count while it runs."""
    with specdec.Model(fixture_path("llama")) as m, specdec.Context(m, n_ctx=4096, n_threads=1) as ctx:
        ctx.generate([20], n_predict=8)  # warm up
        span = {}

        def work():
            span["start"] = time.perf_counter()
            span["out"] = ctx.generate([20], n_predict=1000)
            span["end"] = time.perf_counter()

        ticks = []
        worker = threading.Thread(target=work)
        worker.start()
        while worker.is_alive():
            ticks.append(time.perf_counter())
            time.sleep(0.001)
        worker.join()
        assert len(span["out"].tokens) == 1000
        start, end = span["start"], span["end"]
        margin = (end - start) * 0.2
        inside = [t for t in ticks if start + margin < t < end - margin]
        assert end - start > 0.05, "the call was too short to tell"
        assert len(inside) >= 5, f"{len(inside)} ticks inside a {end - start:.3f} s native call"


def test_cancel_from_another_thread_while_a_step_runs(opened):
    """The engine thread runs a step that decodes a long prompt in one go (no
    Python callback runs inside it); the main thread cancels the request while
    that step is inside native code. The request ends CANCELLED at the next step."""
    o = opened("eagle3", n_ctx=4096)
    prompt = [3 + i % 120 for i in range(3000)]
    with specdec.Engine(o.session, n_prefill_chunk=0) as engine:
        rid = engine.add(prompt, n_predict=500)
        stepping = threading.Event()
        result = {}

        def run():
            stepping.set()
            result["events"] = engine.run_until_idle()

        worker = threading.Thread(target=run)
        worker.start()
        stepping.wait()
        time.sleep(0.01)
        was_stepping = engine._lock.locked()  # the worker is inside step, the GIL released
        engine.cancel(rid)
        still_stepping = engine._lock.locked()
        worker.join(timeout=60)
        assert not worker.is_alive()
    (done,) = [e for e in result["events"] if isinstance(e, specdec.FinishedEvent)]
    assert done.stop_reason == specdec.StopReason.CANCELLED
    assert len(done.tokens) < 500
    assert was_stepping and still_stepping, "cancel did not run while the step did"


def test_cancel_from_another_thread_while_tokens_stream(opened):
    o = opened("eagle3", n_ctx=4096)
    first = threading.Event()
    with specdec.Engine(o.session, on_event=lambda e: first.set()) as engine:
        rid = engine.add([20, 21], n_predict=3000, ignore_eog=True)
        result = {}
        worker = threading.Thread(target=lambda: result.setdefault("events", engine.run_until_idle()))
        worker.start()
        assert first.wait(30)
        engine.cancel(rid)
        worker.join(timeout=60)
    (done,) = [e for e in result["events"] if isinstance(e, specdec.FinishedEvent)]
    assert done.stop_reason == specdec.StopReason.CANCELLED
    assert 0 < len(done.tokens) < 3000


def test_engine_refuses_a_second_stepping_thread(opened):
    o = opened("eagle3")
    with specdec.Engine(o.session) as engine:
        engine.add([20, 21], n_predict=4)
        errors = []

        def on_event(e):
            # From inside a step on the engine's thread: add is allowed.
            if isinstance(e, specdec.FinishedEvent) and not errors:
                t = threading.Thread(target=lambda: errors.append(_raises(engine.step)))
                t.start()
                t.join()

        engine.on_event = on_event
        engine.run_until_idle()
        assert isinstance(errors[0], specdec.InvalidArgumentError)


def _raises(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def test_a_request_paused_from_another_thread_waits_then_ends_as_plain_decoding(opened):
    """pause() from another thread holds the request from the next step on:
    run_until_idle returns with it unfinished, and once it goes on its tokens
    are plain decoding's."""
    o = opened("eagle3")
    ref = o.plain(n_predict=48)[0]
    with specdec.Engine(o.session) as engine:
        rid = engine.add(o.prompts[0], n_predict=48)
        events = engine.step() + engine.step()
        other = threading.Thread(target=lambda: engine.pause(rid))
        other.start()
        other.join()
        events += engine.run_until_idle()
        assert not engine.has_work
        assert not [e for e in events if isinstance(e, specdec.FinishedEvent)]
        emitted = len([e for e in events if isinstance(e, specdec.TokenEvent)])
        assert 0 < emitted < 48
        assert engine.step() == []  # paused: a step emits nothing
        engine.pause(rid, False)
        events += engine.run_until_idle()
        with pytest.raises(specdec.UnknownRequestError):
            engine.pause(rid + 1)
    (done,) = [e for e in events if isinstance(e, specdec.FinishedEvent)]
    assert done.completion.tokens == ref.tokens
    assert [e.token for e in events if isinstance(e, specdec.TokenEvent) and e.token >= 0] == ref.tokens
