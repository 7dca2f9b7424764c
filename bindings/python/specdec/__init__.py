"""specdec: lossless speculative decoding on llama.cpp, from Python.

A ctypes binding of libspecdec's C ABI (include/specdec/specdec.h):

    import specdec

    with specdec.Speculator("target.gguf", "eagle3.gguf") as spec:   # strategy from the files
        for piece in spec.stream("The capital of France is", n_predict=32):
            print(piece.text, end="", flush=True)

The layers under it: Model / Context (llama.cpp objects), Session (a
speculative session over a target and a draft context), Engine (continuous
batching), inspect / check_pair / check_exact (GGUF metadata). Every failure raises a
subclass of SpecdecError named after its specdec_status.
"""

from __future__ import annotations

from typing import Optional, Union

from . import _native
from .engine import Engine, Event, Stream
from .errors import *  # noqa: F401,F403  (the exception hierarchy)
from .errors import ERRORS, SpecdecError, Status, StatusKind, check
from .models import (
    Context,
    Model,
    check_exact,
    check_pair,
    detect_strategy,
    inspect,
    inspect_bytes,
    set_log_callback,
    set_upstream_log_level,
)
from .session import Session, draft_context
from .types import (
    AcceptMode,
    Completion,
    ContextRole,
    DraftSampling,
    FinishedEvent,
    GenerateParams,
    Generation,
    GenerationTimes,
    ModelInfo,
    Piece,
    RequestTimes,
    SequenceStats,
    SessionParams,
    SessionStats,
    StopReason,
    Strategy,
    TokenEvent,
    TokenLogprob,
    TokenProb,
)

__version__ = "0.5.0"

MAX_SEQ = _native.SPECDEC_MAX_SEQ
MAX_DRAFT = _native.SPECDEC_MAX_DRAFT
MAX_TOP_LOGPROBS = _native.SPECDEC_MAX_TOP_LOGPROBS
MIN_SAMPLING_TEMPERATURE = _native.SPECDEC_MIN_SAMPLING_TEMPERATURE
library_path = _native.library_path


def version() -> str:
    """The loaded library's version (specdec_version)."""
    return _native.lib.specdec_version().decode()


def llama_release() -> str:
    """The llama.cpp release the library was built on ("v0.5.0")."""
    return _native.lib.specdec_llama_release().decode()


def set_exact_kernels(exact: bool) -> None:
    """specdec_set_exact_kernels: batch-invariant CPU kernels (on by default)."""
    check(_native.lib.specdec_set_exact_kernels(exact))


def exact_kernels() -> bool:
    return bool(_native.lib.specdec_exact_kernels())


class Speculator:
    """A target model, its drafter and a session, loaded together: the
    object most programs need.

    strategy: None picks it from the files (specdec_detect_strategy: the
    draft's architecture, else MTP when the target has NextN heads); an
    n-gram strategy needs no draft. n_ctx: positions per sequence."""

    def __init__(
        self,
        model_path,
        draft_path=None,
        *,
        strategy: Union[Strategy, str, None] = None,
        n_ctx: int = 4096,
        n_seq: int = 1,
        n_draft_max: int = 3,
        n_draft_min: int = 0,
        p_min: float = 0.0,
        n_threads: Optional[int] = None,
        n_gpu_layers: Optional[int] = None,
    ):
        s = detect_strategy(model_path, draft_path) if strategy is None else Strategy.parse(strategy)
        self.model = Model(model_path, load_mtp=s == Strategy.MTP, n_gpu_layers=n_gpu_layers)
        self.draft_model = None
        self.context = None
        self.session = None
        try:
            if draft_path is not None:
                self.draft_model = Model(draft_path, n_gpu_layers=n_gpu_layers)
            # A recurrent or hybrid target rolls rejected drafts back through snapshots.
            self.context = Context(
                self.model,
                n_ctx=n_ctx * n_seq,
                n_seq=n_seq,
                n_threads=n_threads,
                n_rs_seq=n_draft_max if self.model.is_recurrent else 0,
            )
            self.session = Session.create(
                self.context,
                self.draft_model,
                strategy=s,
                n_seq=n_seq,
                n_draft_max=n_draft_max,
                n_draft_min=n_draft_min,
                p_min=p_min,
                n_threads=n_threads,
            )
        except BaseException:
            self.close()
            raise

    def _tokens(self, prompt):
        return self.model.tokenize(prompt) if isinstance(prompt, (str, bytes)) else list(prompt)

    def tokenize(self, text, **kwargs) -> list:
        return self.model.tokenize(text, **kwargs)

    def generate(self, prompt, params: Optional[GenerateParams] = None, **kwargs) -> Completion:
        """prompt: text (tokenized with the target's vocabulary) or token ids."""
        return self.session.generate(self._tokens(prompt), params, **kwargs)

    def stream(self, prompt, params: Optional[GenerateParams] = None, **kwargs) -> Stream:
        return self.session.stream(self._tokens(prompt), params, **kwargs)

    def engine(self, **kwargs) -> Engine:
        return Engine(self.session, **kwargs)

    def stats(self) -> SessionStats:
        return self.session.stats()

    def close(self) -> None:
        for obj in (self.session, self.context, self.draft_model, self.model):
            if obj is not None:
                obj.close()

    def __enter__(self) -> "Speculator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
