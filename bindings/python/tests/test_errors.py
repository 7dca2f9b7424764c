"""Typed errors for bad input: every failure is the exception class of its
specdec_status, under the class of its kind, with the library's message."""

from __future__ import annotations

import os

import pytest
from conftest import expected_cycle, fixture_path

import specdec
from specdec import _native


def test_every_status_has_its_class_name_and_kind():
    lib = _native.lib
    for status in specdec.Status:
        assert lib.specdec_status_name(int(status)).decode() == status.name
        if status == specdec.Status.OK:
            continue
        cls = specdec.ERRORS[status]
        kind = specdec.StatusKind(lib.specdec_status_kind_of(int(status)))
        assert cls.kind == kind, status
        assert issubclass(cls, specdec.SpecdecError)
        e = specdec.errors.error_for(int(status), "why")
        assert type(e) is cls and e.status == status and e.message == "why"
    assert lib.specdec_status_name(12345) == b"UNKNOWN"
    # A status this package does not know keeps its number and its kind's class.
    e = specdec.errors.error_for(299, "newer")
    assert e.status == 299


def test_bad_pair(fixtures):
    target = fixture_path("llama")
    narrow = fixture_path("eagle3-w128")  # made for a 128-wide target
    with pytest.raises(specdec.WidthMismatchError) as e:
        specdec.check_pair(target, narrow, "eagle3")
    assert isinstance(e.value, specdec.CompatibilityError) and "hidden size 128" in e.value.message
    # The loaded models are refused for the same reason, before llama.cpp could abort.
    with specdec.Model(target) as m, specdec.Model(narrow) as d, specdec.Context(m, n_ctx=256, n_threads=1) as ctx:
        with pytest.raises(specdec.WidthMismatchError):
            specdec.Session.create(ctx, d, strategy="eagle3", n_threads=1)
    # A dense target has no NextN heads.
    with pytest.raises(specdec.ModelUnsupportedError):
        specdec.check_pair(target, None, "mtp")
    specdec.check_pair(target, fixture_path("eagle3"), specdec.Strategy.EAGLE3)
    assert specdec.detect_strategy(target, fixture_path("dflash2")) == specdec.Strategy.DFLASH
    assert specdec.detect_strategy(fixture_path("qwen35-mtp")) == specdec.Strategy.MTP


def test_check_exact(fixtures):
    specdec.check_exact(fixture_path("qwen35-mtp"))
    with pytest.raises(specdec.UnavailableError) as e:
        specdec.check_exact(fixture_path("llama-q1_0"))
    assert "q1_0 weights are not covered" in e.value.message
    with pytest.raises(specdec.FileReadError):
        specdec.check_exact("/nonexistent.gguf")


def test_bad_files(tmp_path):
    with pytest.raises(specdec.FileReadError) as e:
        specdec.inspect(tmp_path / "missing.gguf")
    assert isinstance(e.value, OSError) and isinstance(e.value, specdec.NativeError)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF but not really" * 10)
    with pytest.raises(specdec.MalformedFileError):
        specdec.inspect(bad)
    with pytest.raises(specdec.MalformedFileError):
        specdec.Model(bad)  # inspected first: never reaches llama.cpp's loader
    with pytest.raises(specdec.MalformedFileError):
        specdec.inspect_bytes(b"\0" * 64)
    info = specdec.inspect_bytes(open(fixture_path("eagle3"), "rb").read())
    assert info.architecture == "eagle3" and info.strategies == {specdec.Strategy.EAGLE3}


def test_bad_config(opened):
    o = opened("draft")
    for kwargs, field in [({"n_draft_max": 0}, "n_draft_max"), ({"n_draft_max": 1000}, "n_draft_max"), ({"p_min": 2.0}, "p_min"), ({"n_draft_min": 9}, "n_draft_min")]:
        with pytest.raises(specdec.InvalidConfigError) as e:
            specdec.Session.create(o.context, o.draft_model, strategy="draft", n_threads=1, **kwargs)
        assert field in e.value.message
        assert isinstance(e.value, ValueError) and e.value.kind == specdec.StatusKind.CONFIGURATION
    with pytest.raises(specdec.InvalidArgumentError):
        specdec.Strategy.parse("no-such-strategy")
    # More sequences than the target context holds.
    with pytest.raises(specdec.SeqCapacityError):
        specdec.Session(o.context, None, strategy="ngram-simple", n_seq=4)
    # An MTP session over a model loaded without its NextN heads.
    with specdec.Model(fixture_path("glm4moe-mtp")) as m, specdec.Context(m, n_ctx=256, n_threads=1) as ctx:
        with pytest.raises(specdec.CompatibilityError):
            specdec.Session.create(ctx, strategy="mtp", n_threads=1)
    # Generation parameters.
    with pytest.raises(specdec.InvalidArgumentError):
        o.session.generate([], n_predict=4)
    with pytest.raises(specdec.InvalidArgumentError):
        o.session.generate([5, 100000], n_predict=4)  # a token outside the vocabulary
    with pytest.raises(specdec.InvalidArgumentError):
        o.session.generate([5], n_predict=4, n_top_logprobs=21)
    with pytest.raises(specdec.InvalidArgumentError):
        o.session.generate([5], n_predict=4, n_draft=99)
    with pytest.raises(TypeError):
        o.session.generate([5], n_predct=4)
    with pytest.raises(specdec.ContextFullError):
        o.session.generate(list(range(3, 120)) * 5, n_predict=4)  # longer than the 512 positions


def test_bad_sequence_id(opened):
    o = opened("draft")
    s = o.session
    with pytest.raises(specdec.BadSeqIdError) as e:
        s.begin(5, [1, 2])
    assert isinstance(e.value, specdec.LifecycleError) and "5" in e.value.message
    with pytest.raises(specdec.BadSeqIdError):
        s.state(-1)
    with pytest.raises(specdec.BadSeqIdError):
        s.draft_tokens(3, 0, 5)
    with pytest.raises(specdec.BadSeqIdError):
        s.remove_range(specdec.ContextRole.TARGET, 7)
    # Lifecycle: accept without a proposal, too many, a proposal pending.
    with pytest.raises(specdec.NoProposalError):
        s.accept(0, 1)
    out = s.generate([20, 21, 22], n_predict=4)
    n_past = 3 + len(out.tokens) - 1
    proposal = s.draft_tokens(0, n_past, out.tokens[-1])
    assert proposal
    with pytest.raises(specdec.ProposalPendingError):
        s.state(0)
    with pytest.raises(specdec.ProposalPendingError):
        s.begin(0, [])
    with pytest.raises(specdec.AcceptedTooManyError):
        s.accept(0, len(proposal) + 1)
    s.accept(0, 0)
    with pytest.raises(specdec.PositionMismatchError):
        s.draft_tokens(0, n_past + 50, out.tokens[-1])


def test_engine_errors(opened):
    o = opened("eagle3")
    with specdec.Engine(o.session, max_waiting=1) as engine:
        with pytest.raises(specdec.UnknownRequestError) as e:
            engine.cancel(12345)
        assert "12345" in str(e.value)
        a = engine.add([20, 21], n_predict=4)
        engine.add([20, 21], n_predict=4)  # waits (one slot)
        with pytest.raises(specdec.QueueFullError):
            engine.add([20, 21], n_predict=4)
        events = engine.run_until_idle()
        engine.cancel(a)  # finished already: nothing happens
        assert [e.tokens for e in events if isinstance(e, specdec.FinishedEvent)] == [expected_cycle(21, 4)] * 2
    with pytest.raises(specdec.SeqCapacityError):
        specdec.Engine(o.session, n_seq=2)
    with pytest.raises(specdec.InvalidArgumentError):
        specdec.Engine(o.session, max_waiting=0)


def test_closed_objects_refuse_use(opened):
    o = opened("draft")
    engine = specdec.Engine(o.session)
    o.session.close()  # closes the engine that borrows it
    assert engine.closed and o.session.closed
    with pytest.raises(ValueError, match="closed"):
        o.session.generate([5], n_predict=2)
    with pytest.raises(ValueError, match="closed"):
        engine.step()
    o.model.close()  # closes its contexts first
    assert o.context.closed
