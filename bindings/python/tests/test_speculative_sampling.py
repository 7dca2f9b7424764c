"""Speculative sampling through the binding (specdec 0.4): the `accept`
option of generation, draft sampling and proposal_probs on a session, and
n_reached_at in the statistics.

On the hard MTP fixtures the target's choice is nearly certain; on the soft
ones (conftest.SOFT_CASES) the target draws t's successors 1, 2, 3 with
probabilities 0.5 / 0.25 / 0.25 and the MTP head drafts them with
0.7 / 0.05 / 0.25, so sampled output varies and the acceptance has a closed
form: sum_t min(p, q) = 0.8 in rejection mode, p(the drafted token) = 0.5 in
exact mode (the head's draft is its argmax, successor 1)."""

from __future__ import annotations

import math

import pytest
from conftest import SOFT_DRAFTER, Opened, expected_cycle, successor

import specdec
from specdec import _native

N_PREDICT = 32
MTP_CASES = ["mtp-qwen35", "mtp-glm4moe"]
SOFT = ["mtp-qwen35-soft", "mtp-glm4moe-soft"]


def test_accept_mode_parses_names_values_and_reaches_the_c_struct():
    assert specdec.AcceptMode.parse("rejection") is specdec.AcceptMode.REJECTION
    assert specdec.AcceptMode.parse("EXACT") is specdec.AcceptMode.EXACT
    assert specdec.AcceptMode.parse(1) is specdec.AcceptMode.REJECTION
    assert str(specdec.AcceptMode.REJECTION) == "rejection"
    assert int(specdec.AcceptMode.EXACT) == _native.SPECDEC_ACCEPT_EXACT
    assert int(specdec.AcceptMode.REJECTION) == _native.SPECDEC_ACCEPT_REJECTION
    assert specdec.GenerateParams().accept == specdec.AcceptMode.REJECTION
    for value, raw in (("rejection", 1), (specdec.AcceptMode.EXACT, 0), (1, 1), (7, 7)):
        c, _ = specdec.GenerateParams(accept=value).to_c()
        assert c.accept == raw, value
    with pytest.raises(specdec.InvalidArgumentError, match="accept"):
        specdec.GenerateParams(accept="greedy").to_c()
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        specdec.AcceptMode.parse("speculative")


@pytest.mark.parametrize("case", MTP_CASES + SOFT + ["eagle3"])
def test_rejection_at_temperature_zero_is_greedy_plain_decoding(opened, case):
    o: Opened = opened(case)
    ref = o.plain(n_predict=N_PREDICT)[0]
    assert ref.tokens == expected_cycle(o.prompts[0][-1], N_PREDICT, o.n_vocab)
    out = o.session.generate(o.prompts[0], n_predict=N_PREDICT, accept="rejection")
    assert out.tokens == ref.tokens
    assert out.stats.n_accepted > 0


@pytest.mark.parametrize("case", MTP_CASES + SOFT)
def test_exact_mode_when_sampling_gives_plain_decodings_draws(opened, case):
    o: Opened = opened(case)
    for seed in (1, 42):
        # Plain decoding draws as plain decoding in either mode (nothing to verify).
        ref = o.plain(n_predict=N_PREDICT, temperature=1.0, seed=seed)[0]
        assert o.plain(n_predict=N_PREDICT, temperature=1.0, seed=seed, accept="exact")[0].tokens == ref.tokens
        explicit = o.session.generate(o.prompts[0], n_predict=N_PREDICT, temperature=1.0, seed=seed, accept="exact")
        assert explicit.tokens == ref.tokens, seed
        if case in SOFT:  # the draws are not the greedy chain: sampling ran
            assert ref.tokens != expected_cycle(o.prompts[0][-1], N_PREDICT, o.n_vocab)


@pytest.mark.parametrize("case", MTP_CASES + SOFT)
def test_rejection_sampling_is_deterministic_per_seed(opened, case):
    o: Opened = opened(case)
    kw = dict(n_predict=N_PREDICT, temperature=1.0, seed=9, accept=specdec.AcceptMode.REJECTION, n_draft=3)
    first = o.session.generate(o.prompts[0], **kw)
    again = o.session.generate(o.prompts[0], **kw)
    assert again.tokens == first.tokens
    assert again.stats == first.stats
    assert len(first.tokens) == N_PREDICT
    # Streamed and through the engine: the same configuration, the same tokens.
    assert [p.token for p in o.session.stream(o.prompts[0], **kw)] == first.tokens
    with specdec.Engine(o.session) as engine:
        engine.add(o.prompts[0], **kw)
        (done,) = [e for e in engine.run_until_idle() if isinstance(e, specdec.FinishedEvent)]
    assert done.tokens == first.tokens
    if case in SOFT:
        # Another seed draws otherwise; and rejection mode's draws are not exact mode's.
        other = o.session.generate(o.prompts[0], **{**kw, "seed": 10})
        assert other.tokens != first.tokens
        exact = o.session.generate(o.prompts[0], **{**kw, "accept": "exact"})
        assert exact.tokens != first.tokens


def check_stats_shape(stats: specdec.SequenceStats, n_draft_max: int) -> None:
    assert len(stats.n_reached_at) == len(stats.n_proposed_at) == len(stats.n_accepted_at) == n_draft_max
    assert sum(stats.n_proposed_at) == stats.n_drafted
    assert sum(stats.n_accepted_at) == stats.n_accepted
    assert stats.n_reached_at[0] == stats.n_proposed_at[0]  # every non-empty proposal reaches position 0
    for i in range(n_draft_max):
        assert stats.n_accepted_at[i] <= stats.n_reached_at[i] <= stats.n_proposed_at[i], i
        if i + 1 < n_draft_max:  # reaching i + 1 needs token i kept
            assert stats.n_reached_at[i + 1] <= stats.n_accepted_at[i], i


@pytest.mark.parametrize("case", MTP_CASES + SOFT + ["eagle3", "ngram-simple"])
def test_n_reached_at_counts_the_proposals_that_reach_each_position(opened, case):
    o: Opened = opened(case)
    for kw in ({}, {"temperature": 1.0, "seed": 3, "accept": "rejection"}, {"temperature": 1.0, "seed": 3}):
        before = o.session.stats().n_proposals
        out = o.session.generate(o.prompts[0], n_predict=N_PREDICT, **kw)
        # The session counts the non-empty proposals on its own.
        assert out.stats.n_reached_at[0] == o.session.stats().n_proposals - before > 0, kw
        check_stats_shape(out.stats, o.session.params.n_draft_max)
    # Plain decoding drafts nothing: no positions.
    assert o.plain(n_predict=4)[0].stats.n_reached_at == ()


@pytest.mark.parametrize("case", SOFT)
def test_acceptance_per_position_has_the_closed_form(opened, case):
    """n_accepted_at[i] / n_reached_at[i] is the acceptance at i given the
    ones before were kept: 0.8 at every position in rejection mode, 0.5 in
    exact mode (8 sequences x 128 tokens: 0.1 is over 3 standard deviations
    for every rate checked)."""
    o: Opened = opened(case, n_seq=8, n_draft_max=3, n_ctx=8 * 160)
    rates = {}
    for mode in specdec.AcceptMode:
        out = o.session.generate_batch(o.prompts, n_predict=128, temperature=1.0, seed=5, n_draft=3, accept=mode)
        for c in out:
            check_stats_shape(c.stats, 3)
        reached = [sum(c.stats.n_reached_at[i] for c in out) for i in range(3)]
        accepted = [sum(c.stats.n_accepted_at[i] for c in out) for i in range(3)]
        assert min(reached) > 100, (mode, reached)
        # Per position, and pooled over the positions.
        rates[mode] = [a / r for a, r in zip(accepted, reached)] + [sum(accepted) / sum(reached)]
        one = out[0].stats
        assert one.acceptance_at == tuple(a / r for a, r in zip(one.n_accepted_at, one.n_reached_at))
    assert all(abs(r - 0.8) < 0.1 for r in rates[specdec.AcceptMode.REJECTION]), rates
    # Exact mode keeps fewer, so fewer proposals reach the last positions: position 0 and the pool.
    assert all(abs(r - 0.5) < 0.1 for r in rates[specdec.AcceptMode.EXACT][::3]), rates


def after_generate(o: Opened, n: int = 4):
    """(n_past, id_last) of sequence 0 after a greedy generate: a quiescent
    point from which to draft by hand."""
    out = o.session.generate(o.prompts[0], n_predict=n)
    return len(o.prompts[0]) + len(out.tokens) - 1, out.tokens[-1]


def check_distribution(probs, drafted: int) -> None:
    assert probs, "no distribution reported"
    assert all(isinstance(e, specdec.TokenProb) for e in probs)
    assert math.isclose(sum(p for _, p in probs), 1.0, abs_tol=1e-4)
    assert all(0.0 < p <= 1.0 for _, p in probs)
    assert [p for _, p in probs] == sorted((p for _, p in probs), reverse=True)
    assert drafted in [t for t, _ in probs]
    assert len({t for t, _ in probs}) == len(probs)


@pytest.mark.parametrize("case", SOFT)
def test_draft_sampling_reports_the_drafters_distribution(opened, case):
    o: Opened = opened(case)
    n_past, id_last = after_generate(o)
    # Without sampling: the greedy chain, and no distribution.
    proposal = o.session.draft_tokens(0, n_past, id_last)
    assert proposal == expected_cycle(id_last, 4)
    assert [o.session.proposal_probs(0, i) for i in range(len(proposal))] == [[]] * 4
    o.session.accept(0, 0)

    drafts = {}
    for seed in range(8):
        n_past, id_last = after_generate(o)
        proposal = o.session.draft_tokens(0, n_past, id_last, sampling=specdec.DraftSampling(seed=seed))
        assert len(proposal) == 4
        prev = id_last
        for i, tok in enumerate(proposal):
            probs = o.session.proposal_probs(0, i)
            check_distribution(probs, tok)
            # The soft head's mixture on the successors of the token before.
            listed = dict(probs)
            want = {successor(prev): SOFT_DRAFTER[0], successor(successor(prev)): SOFT_DRAFTER[1],
                    successor(successor(successor(prev))): SOFT_DRAFTER[2]}
            for t, p in want.items():
                assert abs(listed.get(t, 0.0) - p) < 0.01, (i, t, probs[:4])
            assert sum(p for t, p in probs if t not in want) < 1e-3
            prev = tok
        drafts[seed] = proposal
        o.session.accept(0, 0)
    # Sampled, not argmax: some draft leaves the greedy chain; and seeded.
    assert any(d != expected_cycle(id_last, 4) for d in drafts.values()), drafts
    n_past, id_last = after_generate(o)
    assert o.session.draft_tokens(0, n_past, id_last, sampling=specdec.DraftSampling(seed=5)) == drafts[5]
    o.session.accept(0, 0)

    # The transforms reach the drafter: top_k keeps two successors, renormalised;
    # temperature 0.5 squares the mixture.
    for sampling, want in (
        (specdec.DraftSampling(top_k=2, seed=1), [0.7 / 0.95, 0.25 / 0.95]),
        (specdec.DraftSampling(temperature=0.5, seed=1), [0.49 / 0.555, 0.0625 / 0.555, 0.0025 / 0.555]),
        (specdec.DraftSampling(top_p=0.6, seed=1), [1.0]),
    ):
        n_past, id_last = after_generate(o)
        proposal = o.session.draft_tokens(0, n_past, id_last, 2, sampling=sampling)
        assert len(proposal) == 2
        probs = o.session.proposal_probs(0, 0)
        check_distribution(probs, proposal[0])
        got = [p for _, p in probs][: len(want)]
        assert all(abs(g - w) < 0.01 for g, w in zip(got, want)), (sampling, probs[:4])
        if sampling.top_k or sampling.top_p < 1.0:
            assert len(probs) == len(want), (sampling, probs)
        o.session.accept(0, 0)
    # A temperature below MIN_SAMPLING_TEMPERATURE drafts greedily, as with no sampling.
    n_past, id_last = after_generate(o)
    assert o.session.draft_tokens(0, n_past, id_last, sampling=specdec.DraftSampling(temperature=0.0)) == expected_cycle(id_last, 4)
    assert o.session.proposal_probs(0, 0) == []
    o.session.accept(0, 0)


@pytest.mark.parametrize("case", MTP_CASES)
def test_draft_sampling_on_the_hard_mtp_fixtures(opened, case):
    o: Opened = opened(case)
    n_past, id_last = after_generate(o)
    proposal = o.session.draft_tokens(0, n_past, id_last, sampling=specdec.DraftSampling(temperature=1.0, top_k=8, seed=7))
    assert proposal
    for i, tok in enumerate(proposal):
        check_distribution(o.session.proposal_probs(0, i), tok)
    o.session.accept(0, 0)
    n_past, id_last = after_generate(o)
    proposal = o.session.draft_tokens(0, n_past, id_last)
    assert proposal and all(o.session.proposal_probs(0, i) == [] for i in range(len(proposal)))
    o.session.accept(0, 0)


def test_strategies_without_a_distribution_report_none(opened):
    o: Opened = opened("eagle3")
    n_past, id_last = after_generate(o)
    greedy = o.session.draft_tokens(0, n_past, id_last)
    o.session.accept(0, 0)
    n_past, id_last = after_generate(o)
    sampled = o.session.draft_tokens(0, n_past, id_last, sampling=specdec.DraftSampling(seed=3))
    assert sampled == greedy  # drafted as without sampling
    assert all(o.session.proposal_probs(0, i) == [] for i in range(len(sampled)))
    o.session.accept(0, 0)


def test_bad_values_raise_typed_errors(opened):
    o: Opened = opened("mtp-glm4moe-soft")
    prompt = o.prompts[0]
    for bad in (7, -1, 2**31 - 1):  # not a mode: the library refuses it
        with pytest.raises(specdec.InvalidArgumentError, match="accept"):
            o.session.generate(prompt, n_predict=4, accept=bad)
        with pytest.raises(specdec.InvalidArgumentError, match="accept"):
            o.plain(n_predict=4, accept=bad)
    with pytest.raises(specdec.InvalidArgumentError, match="accept"):
        o.session.generate(prompt, n_predict=4, accept="fast")
    with specdec.Engine(o.session) as engine:
        with pytest.raises(specdec.InvalidArgumentError, match="accept"):
            engine.add(prompt, n_predict=4, accept=9)
    # Synthetic acceptance keeps drafts without the target, in either mode.
    a = o.session.generate(prompt, n_predict=16, temperature=1.0, seed=4, accept="rejection", synthetic_acceptance=0.5)
    b = o.session.generate(prompt, n_predict=16, temperature=1.0, seed=4, accept="exact", synthetic_acceptance=0.5)
    assert a.tokens == b.tokens

    n_past, id_last = after_generate(o)
    for bad in (specdec.DraftSampling(top_p=0.0), specdec.DraftSampling(min_p=1.0), specdec.DraftSampling(temperature=math.nan)):
        with pytest.raises(specdec.InvalidArgumentError):
            o.session.draft_tokens(0, n_past, id_last, sampling=bad)
        assert o.session.is_quiescent  # a refused draft leaves no proposal
    proposal = o.session.draft_tokens(0, n_past, id_last, sampling=specdec.DraftSampling(seed=1))
    with pytest.raises(specdec.InvalidArgumentError):
        o.session.proposal_probs(0, len(proposal))
    with pytest.raises(specdec.InvalidArgumentError):
        o.session.proposal_probs(0, -1)
    with pytest.raises(specdec.BadSeqIdError):
        o.session.proposal_probs(5, 0)
    o.session.accept(0, 0)
    with pytest.raises(specdec.InvalidArgumentError):  # no proposal: index 0 is past its end
        o.session.proposal_probs(0, 0)
