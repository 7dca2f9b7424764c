"""Generation over the C ABI (specdec_generate): prompts as token arrays,
results as Completions.

A Session (speculative) and a Context alone (plain decoding) are both a
_Source: each hands over its native handles through _handles(), so this
module, and the Engine above it, need neither class.
"""

from __future__ import annotations

import ctypes
from typing import Optional, Sequence, Tuple

from . import _native
from ._handle import _Handle
from .errors import Status, error_for
from .types import (
    Completion,
    GenerateParams,
    Generation,
    GenerationTimes,
    StopReason,
    sequence_stats_from_c,
    top_logprobs_from_c,
)

lib = _native.lib
Tokens = Sequence[int]


class _Source(_Handle):
    """What generates and what an Engine runs over: a Session or a Context."""

    def _handles(self) -> Tuple[Optional[int], int, int]:
        """The native session (None: plain decoding), the target context and
        the session's n_draft_max (0 without one); ValueError once closed."""
        raise NotImplementedError


def _token_array(tokens: Tokens):
    if isinstance(tokens, (str, bytes)):
        raise TypeError("a prompt is a sequence of token ids (tokenize text with Model.tokenize)")
    return (_native.llama_token * len(tokens))(*tokens)


def _completion(gen, i: int, n_draft_max: int) -> Completion:
    """Sequence i of a native specdec_generation, copied out of it."""
    n = ctypes.c_size_t()
    tokens_p = lib.specdec_generation_tokens(gen, i, ctypes.byref(n))
    tokens = tokens_p[: n.value] if n.value else []
    n_text = ctypes.c_size_t()
    text_p = lib.specdec_generation_text(gen, i, ctypes.byref(n_text))
    text = ctypes.string_at(text_p, n_text.value) if n_text.value else b""
    n_lp = ctypes.c_size_t()
    lp = lib.specdec_generation_logprobs(gen, i, ctypes.byref(n_lp))
    logprobs = lp[: n_lp.value] if lp else None
    n_top = ctypes.c_size_t()
    top = lib.specdec_generation_top_logprobs(gen, i, ctypes.byref(n_top))
    top_logprobs = top_logprobs_from_c(top, n_top.value, len(tokens)) if top else ([[] for _ in tokens] if lp else None)
    return Completion(
        tokens=tokens,
        text_bytes=text,
        stop_reason=StopReason(lib.specdec_generation_stop_reason(gen, i)),
        stats=sequence_stats_from_c(lib.specdec_generation_sequence_stats(gen, i), n_draft_max),
        logprobs=logprobs,
        top_logprobs=top_logprobs,
    )


def _generate(source: _Source, prompts, params, kwargs, on_piece) -> Generation:
    """specdec_generate of `prompts` over a Session or a Context, one sequence
    each; the Generation, or the error with what was generated in `partial`."""
    gp = GenerateParams.of(params, **kwargs)
    c_params, keep = gp.to_c()
    n = len(prompts)
    arrays = [_token_array(p) for p in prompts]
    ptrs = (ctypes.POINTER(_native.llama_token) * max(1, n))(
        *[ctypes.cast(a, ctypes.POINTER(_native.llama_token)) for a in arrays]
    )
    sizes = (ctypes.c_size_t * max(1, n))(*[len(p) for p in prompts])
    raised = []
    callback = _native.specdec_token_callback()  # NULL
    if on_piece is not None:

        def trampoline(seq_id, token, piece, n_piece, _user):
            try:
                return on_piece(seq_id, token, ctypes.string_at(piece, n_piece)) is not False
            except BaseException as e:  # stop every sequence; raised after the call
                raised.append(e)
                return False

        callback = _native.specdec_token_callback(trampoline)
    out = ctypes.c_void_p()
    session, target, n_draft_max = source._handles()
    # The GIL is released for the whole call (ctypes.CDLL); on_piece takes it back per token.
    status = lib.specdec_generate(
        session,
        target,
        ptrs,
        sizes,
        n,
        ctypes.byref(c_params),
        callback,
        None,
        ctypes.byref(out),
    )
    message = lib.specdec_last_error().decode("utf-8", "replace") if status != Status.OK else ""
    result = None
    if out.value:
        try:
            times = lib.specdec_generation_get_times(out.value)
            result = Generation(
                sequences=[_completion(out.value, i, n_draft_max) for i in range(lib.specdec_generation_n_sequences(out.value))],
                times=GenerationTimes(times.t_prefill_us, times.t_verify_us, times.t_draft_us, times.t_total_us),
            )
        finally:
            lib.specdec_generation_free(out.value)
    del keep
    if status != Status.OK:
        raise error_for(status, message, partial=result)
    if raised:
        raise raised[0]
    return result
