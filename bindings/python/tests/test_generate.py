"""The losslessness oracle through the binding: for every strategy the
fixtures support, greedy speculative output equals plain decoding of the same
target, whole, streamed, batched and through the engine."""

from __future__ import annotations

import pytest
from conftest import CASES, Opened, expected_cycle

import specdec

N_PREDICT = 32


@pytest.mark.parametrize("case", sorted(CASES))
def test_greedy_output_equals_plain_decoding(opened, case):
    o: Opened = opened(case)
    ref = o.plain(n_predict=N_PREDICT)[0]
    assert ref.tokens == expected_cycle(o.prompts[0][-1], N_PREDICT, o.n_vocab)

    out = o.session.generate(o.prompts[0], n_predict=N_PREDICT)
    assert out.tokens == ref.tokens
    assert out.text == ref.text
    assert out.stop_reason == specdec.StopReason.BUDGET
    assert out.stats.n_generated == N_PREDICT
    assert out.stats.n_accepted > 0
    if not o.strategy.name.startswith("NGRAM"):
        assert out.stats.n_drafted > out.stats.n_accepted  # drafts rejected and rolled back too
    assert o.session.is_quiescent

    # Streamed: the pieces make the text, the result is the same completion.
    stream = o.session.stream(o.prompts[0], n_predict=N_PREDICT)
    pieces = list(stream)
    assert b"".join(p.piece for p in pieces) == ref.text_bytes
    assert [p.token for p in pieces] == ref.tokens
    assert stream.result.tokens == ref.tokens


@pytest.mark.parametrize("case", ["mtp-glm4moe", "eagle3", "draft", "ngram-simple"])
def test_batched_sequences_equal_plain_decoding(opened, case):
    o = opened(case, n_seq=3)
    ref = o.plain(n_seq=3, n_predict=N_PREDICT)
    seen = {}
    out = o.session.generate_batch(
        o.prompts, n_predict=N_PREDICT, on_piece=lambda seq, tok, piece: seen.setdefault(seq, []).append(piece)
    )
    assert len(out) == 3
    for i in range(3):
        assert out[i].tokens == ref[i].tokens
        assert b"".join(seen[i]) == ref[i].text_bytes
    assert out.times.t_total_us > 0


def test_sampling_is_seeded_and_equals_plain(opened):
    o = opened("eagle3")
    ref = o.plain(n_predict=N_PREDICT, temperature=0.8, seed=42)[0]
    out = o.session.generate(o.prompts[0], n_predict=N_PREDICT, temperature=0.8, seed=42, accept="exact")
    assert out.tokens == ref.tokens


def test_log_probabilities_equal_plain_decoding(opened):
    o = opened("eagle3")
    ref = o.plain(n_predict=16, n_top_logprobs=3)[0]
    out = o.session.generate(o.prompts[0], n_predict=16, n_top_logprobs=3)
    assert out.logprobs == ref.logprobs
    assert len(out.logprobs) == 16 and all(lp <= 0.0 for lp in out.logprobs)
    assert [[t.token for t in pos] for pos in out.top_logprobs] == [[t.token for t in pos] for pos in ref.top_logprobs]
    assert all(len(pos) == 3 and pos[0].token == tok for pos, tok in zip(out.top_logprobs, out.tokens))
    # Streamed pieces carry them too.
    pieces = list(o.session.stream(o.prompts[0], n_predict=16, n_top_logprobs=1))
    assert [p.logprob for p in pieces] == ref.logprobs
    # Not asked: none.
    assert o.session.generate(o.prompts[0], n_predict=4).logprobs is None


def test_logit_bias_penalties_and_grammar_keep_speculation_lossless(opened):
    o = opened("eagle3")
    free = o.plain(n_predict=16)[0]
    # The fixture's successor leads by far more than a penalty can take away,
    # so those are checked for identity alone (the C++ tiers show them acting).
    for shaping, acts in (
        ({"logit_bias": {free.tokens[0]: -100.0}}, True),
        ({"grammar": "root ::= [a-f]+"}, True),
        ({"frequency_penalty": 1.5, "presence_penalty": 0.5}, False),
        ({"repeat_penalty": 3.0, "repeat_last_n": 8}, False),
    ):
        ref = o.plain(n_predict=16, **shaping)[0]
        out = o.session.generate(o.prompts[0], n_predict=16, **shaping)
        assert out.tokens == ref.tokens, shaping
        assert (out.tokens != free.tokens) == acts, f"{shaping}: {out.tokens}"
    with pytest.raises(specdec.InvalidArgumentError):
        o.session.generate(o.prompts[0], n_predict=4, grammar="root ::= (")


def test_stop_strings_and_streaming_early_close(opened):
    o = opened("eagle3")
    ref = o.plain(n_predict=N_PREDICT)[0]
    stop = ref.text[10:12]
    out = o.session.generate(o.prompts[0], n_predict=N_PREDICT, stop=[stop])
    assert out.stop_reason == specdec.StopReason.STRING
    assert out.text == ref.text[:10]

    with o.session.stream(o.prompts[0], n_predict=N_PREDICT) as stream:
        first = [next(stream) for _ in range(3)]
    assert [p.token for p in first] == ref.tokens[:3]
    assert stream.result.stop_reason == specdec.StopReason.CANCELLED
    # The session is usable after an abandoned stream.
    assert o.session.generate(o.prompts[0], n_predict=N_PREDICT).tokens == ref.tokens


def test_callback_stops_a_sequence_and_its_errors_propagate(opened):
    o = opened("eagle3")
    out = o.session.generate_batch([o.prompts[0]], n_predict=N_PREDICT, on_piece=lambda s, t, p: False)
    assert out[0].stop_reason == specdec.StopReason.CALLBACK
    assert len(out[0].tokens) == 1

    def boom(seq, tok, piece):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        o.session.generate_batch([o.prompts[0]], n_predict=N_PREDICT, on_piece=boom)


@pytest.mark.parametrize("case", ["mtp-qwen35", "eagle3", "ngram-simple"])
def test_engine_requests_equal_plain_decoding(opened, case):
    o = opened(case, n_seq=2)
    ref = o.plain(n_seq=3, n_predict=N_PREDICT)
    texts = {}
    with specdec.Engine(o.session, on_event=lambda e: texts.setdefault(e.id, []).append(e.piece) if isinstance(e, specdec.TokenEvent) else None) as engine:
        ids = [engine.add(p, n_predict=N_PREDICT) for p in o.prompts]  # 3 requests, 2 slots
        events = engine.run_until_idle()
        assert not engine.has_work
    finished = {e.id: e for e in events if isinstance(e, specdec.FinishedEvent)}
    assert sorted(finished) == sorted(ids)
    for i, rid in enumerate(ids):
        f = finished[rid]
        assert f.tokens == ref[i].tokens
        assert b"".join(texts[rid]) == ref[i].text_bytes
        assert f.stop_reason == specdec.StopReason.BUDGET
        assert f.times.t_total_us >= f.times.t_first_token_us >= 0
    # Every request's FINISHED comes after its tokens.
    last_token = {e.id: n for n, e in enumerate(events) if isinstance(e, specdec.TokenEvent)}
    assert all(last_token[e.id] < n for n, e in enumerate(events) if isinstance(e, specdec.FinishedEvent))


def test_engine_n_requests_of_one_prompt_decode_it_once(opened):
    o = opened("mtp-qwen35", n_seq=3)
    ref = o.plain(n_seq=1, n_predict=N_PREDICT)
    prompt = o.prompts[0]
    with specdec.Engine(o.session) as engine:
        ids = engine.add_n(prompt, 3, n_predict=N_PREDICT)
        finished = {e.id: e for e in engine.run_until_idle() if isinstance(e, specdec.FinishedEvent)}
    assert sorted(finished) == ids
    assert [finished[i].tokens for i in ids] == [ref[0].tokens] * 3
    assert [finished[i].n_prompt_cached for i in ids] == [0, len(prompt), len(prompt)]  # copied from the first


def test_engine_reuses_prompts_and_reports_cached_tokens(opened):
    o = opened("eagle3")
    prompt = list(range(10, 40))
    with specdec.Engine(o.session) as engine:
        engine.add(prompt, n_predict=8)
        first = [e for e in engine.run_until_idle() if isinstance(e, specdec.FinishedEvent)][0]
        engine.add(prompt + first.tokens + [90, 91], n_predict=8)
        second = [e for e in engine.run_until_idle() if isinstance(e, specdec.FinishedEvent)][0]
    assert first.n_prompt_cached == 0
    assert second.n_prompt_cached >= len(prompt)
    assert second.tokens == expected_cycle(91, 8)


@pytest.mark.parametrize("case", sorted(CASES))
def test_engine_prompt_cache_brings_back_a_taken_slot(opened, case):
    o = opened(case)
    prompt, stranger = o.prompts[0] * 4, o.prompts[1] * 4

    def second_turn(cache_bytes):
        with specdec.Engine(o.session, n_seq=1, prompt_cache_bytes=cache_bytes) as engine:
            engine.add(prompt, n_predict=8)
            first = [e for e in engine.run_until_idle() if isinstance(e, specdec.FinishedEvent)][0]
            engine.add(stranger, n_predict=4)  # takes the only slot
            engine.run_until_idle()
            engine.add(prompt + first.tokens + prompt[:2], n_predict=8)
            return [e for e in engine.run_until_idle() if isinstance(e, specdec.FinishedEvent)][0]

    cached, uncached = second_turn(1 << 30), second_turn(0)
    # The first turn's state, loaded from host memory: its prompt and answer
    # less the answer's last token (never decoded), less the row llama.cpp's
    # drafters defer to the next token.
    assert cached.n_prompt_cached >= len(prompt) + 8 - 2
    assert uncached.n_prompt_cached == 0
    assert cached.tokens == uncached.tokens


def test_plain_engine_and_session_statistics(opened):
    o = opened("draft")
    with specdec.Engine(o.context) as engine:  # plain decoding: no session
        rid = engine.add(o.prompts[0], n_predict=8)
        (done,) = [e for e in engine.run_until_idle() if isinstance(e, specdec.FinishedEvent)]
    assert done.id == rid and done.tokens == expected_cycle(o.prompts[0][-1], 8)
    assert done.completion.stats.n_drafted == 0

    before = o.session.stats()
    out = o.session.generate(o.prompts[0], n_predict=N_PREDICT)
    after = o.session.stats()
    assert after.n_accepted - before.n_accepted == out.stats.n_accepted
    assert len(after.n_accepted_at) == o.session.params.n_draft_max
    assert isinstance(after, specdec.SessionStats) and after.acceptance_rate > 0
    assert o.session.params == specdec.SessionParams(specdec.Strategy.DRAFT, 1, 4, 0, 0.0)


def test_session_state_checkpoint_and_restore(opened):
    """Capture target, draft and session state at a quiescent point, generate
    on, restore, and generating again gives the same continuation."""
    o = opened("draft")
    s = o.session
    out = s.generate(o.prompts[0], n_predict=8)
    blob = s.state(0)
    target = s.context_state(specdec.ContextRole.TARGET, 0)
    draft = s.context_state(specdec.ContextRole.DRAFT, 0)
    assert blob and target and draft
    with pytest.raises(specdec.StateMalformedError):
        s.restore_state(0, b"not a state")
    s.remove_range(specdec.ContextRole.TARGET, 0)
    s.remove_range(specdec.ContextRole.DRAFT, 0)
    s.restore_context_state(specdec.ContextRole.TARGET, 0, target)
    s.restore_context_state(specdec.ContextRole.DRAFT, 0, draft)
    s.restore_state(0, blob)
    assert s.state(0) == blob
    # Continue by hand from the restored point: draft, verify by the cycle, accept.
    n_past = len(o.prompts[0]) + len(out.tokens) - 1
    proposal = s.draft_tokens(0, n_past, out.tokens[-1])
    assert proposal and proposal[0] == expected_cycle(out.tokens[-1], 1)[0]
    assert not s.is_quiescent
    s.accept(0, 0)
    assert s.is_quiescent


@pytest.mark.parametrize("ranking", [None, list(range(0, 128, 2))])
def test_restricted_draft_vocabulary_keeps_the_output(opened, ranking):
    """A restricted draft vocabulary (the tokenizer's first 48 tokens, or the
    even ids) leaves out tokens the target writes: the output is plain
    decoding's, and fewer drafts are kept than with the whole vocabulary."""
    o: Opened = opened("mtp-glm4moe")
    ref = o.plain(n_predict=N_PREDICT)[0]
    whole = o.session.generate(o.prompts[0], n_predict=N_PREDICT)
    o.session.close()  # one session on the context at a time
    size = 48 if ranking is None else 60
    s = specdec.Session.create(o.context, strategy="mtp", n_draft_max=4, n_threads=1, draft_vocab=size, draft_vocab_ranking=ranking)
    try:
        assert s.params.draft_vocab == size
        out = s.generate(o.prompts[0], n_predict=N_PREDICT)
    finally:
        s.close()
    assert out.tokens == ref.tokens == whole.tokens
    assert out.stats.n_accepted < whole.stats.n_accepted
    with pytest.raises(specdec.InvalidConfigError):
        specdec.Session.create(o.context, strategy="mtp", n_threads=1, draft_vocab=129)
    with pytest.raises(specdec.InvalidConfigError):
        specdec.Session.create(o.context, strategy="mtp", n_threads=1, draft_vocab=2, draft_vocab_ranking=[5, 5])


def test_counts_rerank_the_draft_vocabulary(opened):
    """rank_draft_vocab: counts of plain decoding's output move its tokens
    into a 16-token subset that held none of them; the next generation keeps
    drafts where the first kept none, with the same output; the same counts
    again copy nothing; bad counts are refused."""
    o: Opened = opened("mtp-glm4moe")
    ref = o.plain(n_predict=N_PREDICT)[0]
    o.session.close()  # one session on the context at a time
    s = specdec.Session.create(o.context, strategy="mtp", n_draft_max=4, n_threads=1, draft_vocab=16)
    try:
        before = s.generate(o.prompts[0], n_predict=N_PREDICT)
        counts = [0] * o.n_vocab
        for t in ref.tokens:
            counts[t] += 1
        assert s.rank_draft_vocab(counts) == 16
        assert s.rank_draft_vocab(counts) == 0
        after = s.generate(o.prompts[0], n_predict=N_PREDICT)
        with pytest.raises(specdec.InvalidArgumentError):
            s.rank_draft_vocab(counts[:-1])
        with pytest.raises(specdec.InvalidArgumentError):
            s.rank_draft_vocab([-1] + counts[1:])
    finally:
        s.close()
    assert before.tokens == after.tokens == ref.tokens
    assert before.stats.n_accepted == 0
    assert after.stats.n_accepted > 0
    whole = specdec.Session.create(o.context, strategy="mtp", n_draft_max=4, n_threads=1)
    try:
        with pytest.raises(specdec.InvalidConfigError):
            whole.rank_draft_vocab(counts)
    finally:
        whole.close()
