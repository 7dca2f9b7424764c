"""No leak over 1,000 create/free cycles: resident memory after the last
cycle is within a small margin of what it was after the first hundred (by
then allocators and caches have reached their steady size)."""

from __future__ import annotations

import gc
import os

from conftest import fixture_path

import specdec

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def test_no_leak_over_1000_cycles():
    target = specdec.Model(fixture_path("llama"))
    draft = specdec.Model(fixture_path("eagle3"))

    def cycle(i: int) -> None:
        # A context, a draft context, a session, an engine and a streamed
        # generation, freed by close(), by `with` and by the garbage collector in turn.
        ctx = specdec.Context(target, n_ctx=128, n_threads=1)
        session = specdec.Session.create(ctx, draft, strategy="eagle3", n_draft_max=2, n_threads=1)
        pieces = list(session.stream([20, 21], n_predict=3, n_top_logprobs=1))
        assert len(pieces) == 3
        engine = specdec.Engine(session)
        engine.add([20], n_predict=1)
        engine.run_until_idle()
        if i % 3 == 0:
            session.close()
            ctx.close()
        elif i % 3 == 1:
            with engine, session, ctx:
                pass
        # else: dropped, freed when collected

    for i in range(100):
        cycle(i)
    gc.collect()
    base = rss()
    for i in range(100, 1000):
        cycle(i)
    gc.collect()
    grown = rss() - base
    target.close()
    draft.close()
    assert grown < 8 * 1024 * 1024, f"resident memory grew by {grown / 1024 / 1024:.1f} MiB over 900 cycles"
