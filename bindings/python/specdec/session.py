"""Speculative sessions: the draft-and-verify loop by hand, checkpoints,
and generation over a target and a draft context."""

from __future__ import annotations

import ctypes
from typing import Callable, Optional, Sequence, Union

from . import _native
from .engine import Stream
from .errors import InvalidArgumentError, Status, check
from .generation import Tokens, _generate, _Source, _token_array
from .models import Context, Model, default_threads
from .types import (
    Completion,
    ContextRole,
    DraftSampling,
    GenerateParams,
    Generation,
    SessionParams,
    SessionStats,
    Strategy,
    TokenProb,
    session_params_from_c,
    session_stats_from_c,
)

lib = _native.lib


def _session_params(strategy, n_seq, n_draft_max, n_draft_min, p_min, draft_vocab=0, draft_vocab_ranking=None):
    """The C parameters, and the ranking array they point at (keep it alive
    until the call that reads them returns)."""
    p = lib.specdec_session_default_params()
    p.strategy = int(Strategy.parse(strategy))
    p.n_seq = n_seq
    p.n_draft_max = n_draft_max
    p.n_draft_min = n_draft_min
    p.p_min = p_min
    p.draft_vocab = _native.SPECDEC_DRAFT_VOCAB_AUTO if draft_vocab == "auto" else int(draft_vocab)
    ranking = None
    if draft_vocab_ranking is not None:
        ids = list(draft_vocab_ranking)
        ranking = (ctypes.c_int32 * max(1, len(ids)))(*ids)
        p.draft_vocab_ranking = ctypes.cast(ranking, ctypes.POINTER(ctypes.c_int32))
        p.n_draft_vocab_ranking = len(ids)
    return p, ranking


def draft_context(
    target: Context,
    draft_model: Optional[Model] = None,
    *,
    strategy: Union[Strategy, str] = Strategy.MTP,
    n_seq: Optional[int] = None,
    n_draft_max: int = 3,
    n_threads: Optional[int] = None,
    **params,
) -> Context:
    """The draft context a strategy needs over `target` (specdec_draft_context_init):
    an MTP context over the target's model (draft_model None; the model must be
    loaded with load_mtp=True), or a context over draft_model. It keeps
    `target` alive. params: other llama_context_params fields (cache types, ...)."""
    sp, _ = _session_params(strategy, target.n_seq_max if n_seq is None else n_seq, n_draft_max, 0, 0.0)
    cp = lib.llama_context_default_params()
    threads = default_threads() if n_threads is None else n_threads
    cp.n_threads = threads
    cp.n_threads_batch = threads
    for name, value in params.items():
        setattr(cp, name, value)
    out = ctypes.c_void_p()
    check(
        lib.specdec_draft_context_init(
            target.handle, None if draft_model is None else draft_model.handle, ctypes.byref(sp), cp, ctypes.byref(out)
        )
    )
    model = draft_model if draft_model is not None else target.model
    return Context._wrap(out.value, model, target)


class Session(_Source):
    """A speculative session over a target Context and a draft Context (None
    for the n-gram strategies); see specdec_session_init. It borrows both for
    its whole life (they stay alive while it does). One thread at a time.

    n_seq: sequences (default: the target's n_seq_max)."""

    def __init__(
        self,
        target: Context,
        draft: Optional[Context] = None,
        *,
        strategy: Union[Strategy, str] = Strategy.MTP,
        n_seq: Optional[int] = None,
        n_draft_max: int = 3,
        n_draft_min: int = 0,
        p_min: float = 0.0,
        draft_vocab: Union[int, str] = 0,
        draft_vocab_ranking: Optional[Sequence[int]] = None,
    ):
        """draft_vocab: the drafter scores only this many tokens of
        draft_vocab_ranking (token ids, most frequent first; None: a ranking
        from the tokenizer); 0: the whole vocabulary; "auto": by vocabulary
        size (SPECDEC_DRAFT_VOCAB_AUTO)."""
        sp, _ranking = _session_params(
            strategy, target.n_seq_max if n_seq is None else n_seq, n_draft_max, n_draft_min, p_min, draft_vocab, draft_vocab_ranking
        )
        out = ctypes.c_void_p()
        check(lib.specdec_session_init(target.handle, None if draft is None else draft.handle, ctypes.byref(sp), ctypes.byref(out)))
        self.target = target
        self.draft = draft
        self._own(out.value, lib.specdec_session_free, target, draft)
        self._params = session_params_from_c(lib.specdec_session_get_params(out.value))

    @classmethod
    def create(
        cls,
        target: Context,
        draft_model: Optional[Model] = None,
        *,
        strategy: Union[Strategy, str] = Strategy.MTP,
        n_seq: Optional[int] = None,
        n_draft_max: int = 3,
        n_draft_min: int = 0,
        p_min: float = 0.0,
        n_threads: Optional[int] = None,
        draft_vocab: Union[int, str] = 0,
        draft_vocab_ranking: Optional[Sequence[int]] = None,
    ) -> "Session":
        """A session with the draft context its strategy needs made for it
        (draft_context), which close() frees with the session."""
        s = Strategy.parse(strategy)
        draft = None
        if s.needs_draft_context:
            draft = draft_context(
                target, draft_model, strategy=s, n_seq=n_seq, n_draft_max=n_draft_max, n_threads=n_threads
            )
        try:
            session = cls(
                target,
                draft,
                strategy=s,
                n_seq=n_seq,
                n_draft_max=n_draft_max,
                n_draft_min=n_draft_min,
                p_min=p_min,
                draft_vocab=draft_vocab,
                draft_vocab_ranking=draft_vocab_ranking,
            )
        except BaseException:
            if draft is not None:
                draft.close()
            raise
        session._owned_draft = draft
        return session

    def close(self) -> None:
        super().close()
        owned, self._owned_draft = getattr(self, "_owned_draft", None), None
        if owned is not None:
            owned.close()

    # --- state ------------------------------------------------------------------
    @property
    def params(self) -> SessionParams:
        """Parameters in effect (n_draft_max may be lower than asked: a DFlash block)."""
        return self._params

    @property
    def strategy(self) -> Strategy:
        return self._params.strategy

    @property
    def is_quiescent(self) -> bool:
        """No sequence has a pending proposal."""
        return bool(lib.specdec_session_is_quiescent(self.handle))

    @property
    def reads_target_features(self) -> bool:
        return bool(lib.specdec_session_reads_target_features(self.handle))

    @property
    def can_move_sequences(self) -> bool:
        return bool(lib.specdec_session_can_move_sequences(self.handle))

    def rank_draft_vocab(self, counts: Sequence[int]) -> int:
        """Re-ranks the restricted draft vocabulary by a count per token of
        the vocabulary (specdec_session_rank_draft_vocab): the subset becomes
        the params.draft_vocab most counted tokens (ties and uncounted tokens
        in the tokenizer's order); only the rows of the tokens that enter are
        copied. Returns how many entered. Between steps only. Raises
        InvalidConfigError without a restricted vocabulary,
        InvalidArgumentError for a negative count or len(counts) other than
        the vocabulary's size, ProposalPendingError while a proposal awaits
        accept()."""
        values = [int(c) for c in counts]
        if any(c < 0 or c >= 1 << 64 for c in values):
            raise InvalidArgumentError(Status.INVALID_ARGUMENT, "a count is negative or above 64 bits")
        arr = (ctypes.c_uint64 * len(values))(*values)
        n = ctypes.c_int32()
        check(lib.specdec_session_rank_draft_vocab(self.handle, arr, len(values), ctypes.byref(n)))
        return n.value

    def stats(self) -> SessionStats:
        return session_stats_from_c(lib.specdec_session_get_stats(self.handle), self._params.n_draft_max)

    # --- the loop by hand (the same calls generate makes) -----------------------------
    def begin(self, seq_id: int, prompt: Tokens = ()) -> None:
        """Announces a fresh generation: `prompt` is what the target holds for seq_id."""
        arr = _token_array(prompt)
        check(lib.specdec_session_begin(self.handle, seq_id, arr, len(prompt)))

    def draft_tokens(
        self, seq_id: int, n_past: int, id_last: int, n_max: int = -1, *, sampling: Optional[DraftSampling] = None
    ) -> list:
        """Drafts for one sequence; the proposal (possibly empty) is returned and,
        when not empty, pending until accept(). n_max: cap for this proposal,
        0..n_draft_max (-1: n_draft_max). sampling: None drafts the drafter's
        most likely tokens; a DraftSampling draws each token from the
        drafter's distribution under its transforms, and proposal_probs()
        reports that distribution (MTP only; other strategies draft as with
        None and report none)."""
        c_sampling = sampling.to_c() if sampling is not None else None
        req = _native.specdec_draft_request(
            seq_id, n_past, id_last, n_max, ctypes.pointer(c_sampling) if c_sampling is not None else None
        )
        check(lib.specdec_session_draft(self.handle, ctypes.byref(req), 1))
        return self.proposal(seq_id)

    def proposal(self, seq_id: int) -> list:
        ptr = ctypes.POINTER(_native.llama_token)()
        n = ctypes.c_size_t()
        check(lib.specdec_session_proposal(self.handle, seq_id, ctypes.byref(ptr), ctypes.byref(n)))
        return ptr[: n.value] if n.value else []

    def proposal_probs(self, seq_id: int, index: int) -> list:
        """The distribution token `index` of seq_id's latest proposal was drawn
        from (specdec_session_proposal_probs): a list of TokenProb (token, p),
        most likely first, summing to 1 and holding the drafted token; a
        token not listed has probability 0. Empty when the token was not
        sampled (drafted without `sampling`, or by a strategy without a
        distribution: a point mass on the token). Valid until the next draft,
        accept or close (copied here). Raises BadSeqIdError, and
        InvalidArgumentError for index >= the proposal's length."""
        if index < 0:
            raise InvalidArgumentError(Status.INVALID_ARGUMENT, f"index is {index}; it must be >= 0")
        ptr = ctypes.POINTER(_native.specdec_token_prob)()
        n = ctypes.c_size_t()
        check(lib.specdec_session_proposal_probs(self.handle, seq_id, index, ctypes.byref(ptr), ctypes.byref(n)))
        return [TokenProb(e.token, e.p) for e in ptr[: n.value]] if n.value else []

    def accept(self, seq_id: int, n_accepted: int) -> None:
        check(lib.specdec_session_accept(self.handle, seq_id, n_accepted))

    def remove_range(self, role: ContextRole, seq_id: int, p0: int = -1, p1: int = -1) -> None:
        """Removes positions [p0, p1) of seq_id from a context (p0 < 0: from 0, p1 < 0: to the end)."""
        check(lib.specdec_session_remove_range(self.handle, int(role), seq_id, p0, p1))

    def move_sequence(self, src: int, dst: int) -> None:
        check(lib.specdec_session_move_sequence(self.handle, src, dst))

    def copy_sequence(self, src: int, dst: int) -> None:
        """Copies sequence src into the empty dst, src unchanged (specdec_session_copy_sequence)."""
        check(lib.specdec_session_copy_sequence(self.handle, src, dst))

    @property
    def n_nextn_heads(self) -> int:
        return lib.specdec_session_n_nextn_heads(self.handle)

    def set_nextn_head(self, head: int) -> None:
        check(lib.specdec_session_set_nextn_head(self.handle, head))

    # --- checkpoints --------------------------------------------------------------
    def state(self, seq_id: int) -> bytes:
        """The session's state of seq_id (needs quiescence); see specdec_session_state_get."""
        return _read_blob(lambda dst, cap, n: lib.specdec_session_state_get(self.handle, seq_id, dst, cap, n))

    def restore_state(self, seq_id: int, blob: bytes) -> None:
        """Restores a blob from state() into seq_id: the sequence it was captured from or,
        where the drafter's state can move (can_move_sequences), any other (else
        StateSequenceError). Validated first: on error nothing changed."""
        buf = (ctypes.c_uint8 * len(blob)).from_buffer_copy(blob)
        check(lib.specdec_session_state_set(self.handle, seq_id, buf, len(blob)))

    def context_state(self, role: ContextRole, seq_id: int, flags: int = 0) -> bytes:
        """A context's state of seq_id (llama_state_seq_get_data_ext with flags)."""
        return _read_blob(
            lambda dst, cap, n: lib.specdec_session_context_state_get(self.handle, int(role), seq_id, flags, dst, cap, n)
        )

    def restore_context_state(self, role: ContextRole, seq_id: int, blob: bytes, flags: int = 0) -> None:
        buf = (ctypes.c_uint8 * len(blob)).from_buffer_copy(blob)
        check(lib.specdec_session_context_state_set(self.handle, int(role), seq_id, flags, buf, len(blob)))

    # --- generation ---------------------------------------------------------------
    def generate(self, prompt: Tokens, params: Optional[GenerateParams] = None, **kwargs) -> Completion:
        """Generates from one prompt (token ids); keyword arguments are GenerateParams
        fields (n_predict=..., temperature=..., stop=[...], n_top_logprobs=...).
        Greedy output equals plain decoding of the target (Context.generate)."""
        return _generate(self, [prompt], params, kwargs, None)[0]

    def generate_batch(
        self,
        prompts: Sequence[Tokens],
        params: Optional[GenerateParams] = None,
        on_piece: Optional[Callable[[int, int, bytes], Optional[bool]]] = None,
        **kwargs,
    ) -> Generation:
        """One sequence per prompt, verified together. on_piece(seq_id, token,
        piece) is called for every emitted token; returning False stops that sequence."""
        return _generate(self, prompts, params, kwargs, on_piece)

    def stream(self, prompt: Tokens, params: Optional[GenerateParams] = None, **kwargs) -> Stream:
        """An iterator over the Pieces of one generation, produced as it is
        consumed (on the calling thread); its `result` is the Completion once
        it is exhausted. Closing it early (break, close()) stops the generation."""
        return Stream(self, prompt, params, kwargs)

    def _handles(self):
        return self.handle, self.target.handle, self._params.n_draft_max

    def __repr__(self) -> str:
        return f"Session({self._params})" if not self.closed else "Session(closed)"


def _read_blob(call) -> bytes:
    n = ctypes.c_size_t()
    check(call(None, 0, ctypes.byref(n)))
    buf = (ctypes.c_uint8 * max(1, n.value))()
    check(call(buf, n.value, ctypes.byref(n)))
    return bytes(buf[: n.value])
