"""Plain data: enums, parameters and results as dataclasses."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Optional, Sequence, Union

from . import _native
from .errors import InvalidArgumentError, Status, check


class Strategy(enum.IntEnum):
    """specdec_strategy. `str(s)` is the library's name ("mtp", "ngram-map-k")."""

    MTP = 0
    EAGLE3 = 1
    DFLASH = 2
    DSPARK = 3
    DRAFT = 4
    NGRAM_SIMPLE = 5
    NGRAM_MAP_K = 6
    NGRAM_MAP_K4V = 7
    NGRAM_MOD = 8
    NGRAM_CACHE = 9

    def __str__(self) -> str:
        return _native.lib.specdec_strategy_name(int(self)).decode()

    @property
    def needs_draft_context(self) -> bool:
        """All but the n-gram family draft from a draft context."""
        return bool(_native.lib.specdec_strategy_needs_draft_context(int(self)))

    @classmethod
    def parse(cls, value: Union["Strategy", str, int]) -> "Strategy":
        """A Strategy from itself, its value, or its name ("eagle3", "ngram-mod")."""
        if isinstance(value, Strategy):
            return value
        if isinstance(value, int):
            return cls(value)
        out = _native.c_enum()
        check(_native.lib.specdec_strategy_from_name(str(value).encode(), _native.ctypes.byref(out)))
        return cls(out.value)


class StopReason(enum.IntEnum):
    """specdec_stop_reason: why a sequence or request ended."""

    BUDGET = 0
    EOG = 1
    STRING = 2
    CONTEXT = 3
    CALLBACK = 4
    ERROR = 5
    CANCELLED = 6

    def __str__(self) -> str:
        return self.name.lower()


class AcceptMode(enum.IntEnum):
    """specdec_accept_mode: how a drafted token is kept when a request samples
    (temperature >= MIN_SAMPLING_TEMPERATURE; greedy requests keep a draft
    exactly when it is the target's argmax, in either mode). `str(m)` is
    "exact" or "rejection".

    EXACT: the target draws each verified row with plain decoding's seeded
    sampler and a draft is kept when it equals that draw: seed for seed the
    tokens plain decoding gives (a draft x is kept with probability p(x)).

    REJECTION: speculative sampling. A draft x drawn from the drafter's q is
    kept with probability min(1, p(x) / q(x)); after a rejection the token is
    drawn from max(0, p - q), normalised. Each token has exactly the target's
    distribution p, but not plain decoding's draws; a draft is kept with
    probability sum_t min(p(t), q(t)). The same seed, drafts and
    configuration give the same tokens (with n_draft="auto" the drafts'
    lengths depend on measured costs, so two runs may differ). Drafters
    without a distribution (all but MTP) draft their most likely token, a
    point mass: then as EXACT, x kept with probability p(x)."""

    EXACT = 0
    REJECTION = 1

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, value: Union["AcceptMode", str, int]) -> Union["AcceptMode", int]:
        """An AcceptMode from itself, its name ("exact", "rejection", any case)
        or its value. A name that is not a mode raises InvalidArgumentError;
        an int that is not a mode is returned as it is, for the library to
        refuse (InvalidArgumentError from the call that passes it)."""
        if isinstance(value, AcceptMode):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                return value
        if isinstance(value, (str, bytes)):
            name = value.decode() if isinstance(value, bytes) else value
            try:
                return cls[name.upper()]
            except KeyError:
                pass
        raise InvalidArgumentError(
            Status.INVALID_ARGUMENT, f"accept is {value!r}; it must be 'exact' or 'rejection' (or an AcceptMode)"
        )


class ContextRole(enum.IntEnum):
    """specdec_context_role: which borrowed context a call addresses."""

    TARGET = 0
    DRAFT = 1


@dataclass(frozen=True)
class TokenLogprob:
    token: int
    logprob: float  # natural log of the target's probability, before temperature and truncation


class TokenProb(NamedTuple):
    """specdec_token_prob: one token of a drafter's distribution."""

    token: int
    p: float  # probability, in (0, 1]


@dataclass(frozen=True)
class DraftSampling:
    """specdec_draft_sampling: how Session.draft_tokens samples its tokens
    from the drafter's own distribution (for speculative sampling), with the
    transforms of GenerateParams. Draws are a function of (seed, the position
    a token is drafted for): the same seed, state and positions give the same
    drafts. Only MTP drafts through specdec's own driver sample and report
    their distribution (Session.proposal_probs); the other strategies draft
    their most likely tokens and report none.

    temperature: >= MIN_SAMPLING_TEMPERATURE (1e-4); lower drafts greedily,
    as with no sampling. top_k: keep the k most likely tokens (<= 0: off).
    top_p: nucleus mass in (0, 1] (1: off). min_p: drop tokens below min_p x
    the top probability, in [0, 1) (0: off). seed: 0 .. 2**64 - 1. Values
    out of range raise InvalidArgumentError from the draft."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 0

    def to_c(self) -> "_native.specdec_draft_sampling":
        return _native.specdec_draft_sampling(self.temperature, self.top_k, self.top_p, self.min_p, self.seed)


@dataclass(frozen=True)
class SessionParams:
    """specdec_session_params, as in effect (n_draft_max may be lowered by the drafter)."""

    strategy: Strategy
    n_seq: int
    n_draft_max: int
    n_draft_min: int
    p_min: float
    draft_vocab: int = 0  # tokens the drafter scores (a restricted draft vocabulary); 0: the whole vocabulary


@dataclass(frozen=True)
class SessionStats:
    """specdec_session_stats: counters and timings (microseconds) since the session was created.
    n_accepted_at[i]: proposals whose token i was accepted (one entry per draft position)."""

    n_begin: int
    n_process: int
    n_draft: int
    n_proposals: int
    n_drafted: int
    n_accept: int
    n_accepted: int
    n_accepted_at: tuple
    t_begin_us: int
    t_process_us: int
    t_draft_us: int
    t_accept_us: int

    @property
    def acceptance_rate(self) -> float:
        return self.n_accepted / self.n_drafted if self.n_drafted else 0.0


@dataclass(frozen=True)
class SequenceStats:
    """specdec_sequence_stats of one sequence or request (verified drafts
    only). The per-position tuples have one entry per draft position
    (the session's n_draft_max; empty for plain decoding):
    n_proposed_at[i]: proposals with a token at position i;
    n_accepted_at[i]: proposals whose token i was kept;
    n_reached_at[i]: proposals with a token at position i whose tokens before
    it were all kept (n_reached_at[0] == n_proposed_at[0], the non-empty
    proposals)."""

    n_generated: int
    n_steps: int
    n_drafted: int
    n_accepted: int
    n_proposed_at: tuple
    n_accepted_at: tuple
    n_reached_at: tuple = ()

    @property
    def acceptance_rate(self) -> float:
        return self.n_accepted / self.n_drafted if self.n_drafted else 0.0

    @property
    def acceptance_at(self) -> tuple:
        """Per draft position i: n_accepted_at[i] / n_reached_at[i], the
        fraction of drafts kept at i given the ones before it were kept
        (0.0 where no proposal reached i)."""
        return tuple(a / r if r else 0.0 for a, r in zip(self.n_accepted_at, self.n_reached_at))


@dataclass(frozen=True)
class GenerationTimes:
    """specdec_generation_times of one generate call, microseconds."""

    t_prefill_us: int
    t_verify_us: int
    t_draft_us: int
    t_total_us: int


@dataclass(frozen=True)
class RequestTimes:
    """specdec_request_times of an engine request, microseconds from its add."""

    t_first_token_us: int  # -1: no token was emitted
    t_total_us: int


@dataclass(frozen=True)
class Completion:
    """One sequence's output. `text` is the UTF-8 text (invalid bytes replaced);
    `text_bytes` the exact bytes (a budget can end inside a character)."""

    tokens: list
    text_bytes: bytes
    stop_reason: StopReason
    stats: SequenceStats
    logprobs: Optional[list] = None  # one float per token, with n_top_logprobs >= 0
    top_logprobs: Optional[list] = None  # per token: a list of n_top_logprobs TokenLogprob

    @property
    def text(self) -> str:
        return self.text_bytes.decode("utf-8", "replace")


@dataclass(frozen=True)
class Generation:
    """What one generate call returns: a Completion per prompt, and its times."""

    sequences: list
    times: GenerationTimes

    def __getitem__(self, i: int) -> Completion:
        return self.sequences[i]

    def __len__(self) -> int:
        return len(self.sequences)


@dataclass(frozen=True)
class Piece:
    """One streamed token and the text it releases (possibly empty: text is
    held back while it could start a stop string or ends inside a UTF-8
    character). token is -1 (LLAMA_TOKEN_NULL) for the text released after an
    end-of-generation token."""

    token: int
    piece: bytes
    seq_id: int = 0
    logprob: Optional[float] = None
    top_logprobs: Optional[list] = None

    @property
    def text(self) -> str:
        return self.piece.decode("utf-8", "replace")


@dataclass(frozen=True)
class TokenEvent:
    """An engine request emitted a token (SPECDEC_ENGINE_EVENT_TOKEN)."""

    id: int
    seq_id: int
    token: int
    piece: bytes
    logprob: Optional[float] = None
    top_logprobs: Optional[list] = None

    @property
    def text(self) -> str:
        return self.piece.decode("utf-8", "replace")


@dataclass(frozen=True)
class FinishedEvent:
    """An engine request left (SPECDEC_ENGINE_EVENT_FINISHED), with its result."""

    id: int
    seq_id: int  # -1: it never had a slot (cancelled while waiting)
    completion: Completion
    times: RequestTimes
    n_prompt_cached: int  # prompt tokens taken from the slot's memory, not decoded

    @property
    def stop_reason(self) -> StopReason:
        return self.completion.stop_reason

    @property
    def tokens(self) -> list:
        return self.completion.tokens

    @property
    def text(self) -> str:
        return self.completion.text


@dataclass(frozen=True)
class ModelInfo:
    """specdec_model_info: a GGUF file's metadata (no weights loaded)."""

    architecture: str
    name: str
    file_size: int
    n_params: int
    n_tensors: int
    n_vocab: int
    n_embd: int
    n_layer: int
    n_layer_nextn: int
    target_layers: tuple
    target_hidden_size: int
    block_size: int
    dflash2: bool
    markov_head: bool
    strategies: frozenset  # of Strategy: as target (MTP, n-gram) or as draft (EAGLE3, DFLASH, DSPARK, DRAFT)


@dataclass
class GenerateParams:
    """specdec_generate_params, with Python's defaults equal to the library's
    (specdec_generate_default_params; a test checks it).

    n_draft: tokens drafted per step (an int up to the session's n_draft_max),
    None for n_draft_max, or "auto" (SPECDEC_N_DRAFT_AUTO). n_top_logprobs:
    None for no log-probabilities; 0..20 for each token's log-probability and
    that many alternatives (prompt_logprobs: the prompt's too). logit_bias:
    {token id: bias}; the penalties and grammar (GBNF) as in specdec.h.
    accept: how drafts are kept when sampling (AcceptMode, "exact" or
    "rejection"; default rejection: the target's distribution, more drafts
    kept; exact: plain decoding's tokens seed for seed); a
    name that is not a mode raises InvalidArgumentError, as does the call for
    an int that is not one."""

    n_predict: int = 128
    n_draft: Union[int, str, None] = None
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 0
    ignore_eog: bool = False
    stop: Sequence[str] = field(default_factory=tuple)
    n_top_logprobs: Optional[int] = None
    synthetic_acceptance: Optional[float] = None  # BENCHMARKING ONLY (see specdec.h)
    prompt_logprobs: bool = False
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    grammar: Optional[str] = None
    accept: Union[AcceptMode, str, int] = AcceptMode.REJECTION

    FIELDS = (
        "n_predict",
        "n_draft",
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "seed",
        "ignore_eog",
        "stop",
        "n_top_logprobs",
        "synthetic_acceptance",
        "prompt_logprobs",
        "logit_bias",
        "presence_penalty",
        "frequency_penalty",
        "repeat_penalty",
        "repeat_last_n",
        "grammar",
        "accept",
    )

    @classmethod
    def of(cls, params: Optional["GenerateParams"] = None, **kwargs) -> "GenerateParams":
        """params with kwargs over it (unknown names are a TypeError)."""
        unknown = set(kwargs) - set(cls.FIELDS)
        if unknown:
            raise TypeError(f"unknown generation parameter(s): {', '.join(sorted(unknown))}")
        base = params if params is not None else cls()
        if not kwargs:
            return base
        values = {name: getattr(base, name) for name in cls.FIELDS}
        values.update(kwargs)
        return cls(**values)

    def to_c(self):
        """(specdec_generate_params, objects it points to, to keep alive during the call)."""
        p = _native.lib.specdec_generate_default_params()
        p.n_predict = self.n_predict
        if self.n_draft is None:
            p.n_draft = -1
        elif self.n_draft == "auto":
            p.n_draft = _native.SPECDEC_N_DRAFT_AUTO
        elif isinstance(self.n_draft, int):
            p.n_draft = self.n_draft
        else:
            raise TypeError(f"n_draft must be an int, None or 'auto', not {self.n_draft!r}")
        p.temperature = self.temperature
        p.top_k = self.top_k
        p.top_p = self.top_p
        p.min_p = self.min_p
        p.seed = self.seed
        p.ignore_eog = self.ignore_eog
        stops = [self.stop] if isinstance(self.stop, (str, bytes)) else list(self.stop)
        encoded = [s.encode() if isinstance(s, str) else bytes(s) for s in stops]
        array = (_native.c_char_p * max(1, len(encoded)))(*encoded)
        p.stop_strings = array if encoded else None
        p.n_stop_strings = len(encoded)
        p.n_top_logprobs = -1 if self.n_top_logprobs is None else self.n_top_logprobs
        p.synthetic_acceptance = -1.0 if self.synthetic_acceptance is None else self.synthetic_acceptance
        p.prompt_logprobs = self.prompt_logprobs
        biases = (_native.specdec_logit_bias * max(1, len(self.logit_bias)))(*self.logit_bias.items())
        p.logit_bias = biases if self.logit_bias else None
        p.n_logit_bias = len(self.logit_bias)
        p.presence_penalty = self.presence_penalty
        p.frequency_penalty = self.frequency_penalty
        p.repeat_penalty = self.repeat_penalty
        p.repeat_last_n = self.repeat_last_n
        grammar = self.grammar.encode() if self.grammar else None
        p.grammar = grammar
        p.accept = int(AcceptMode.parse(self.accept))
        return p, (array, encoded, biases, grammar)


def session_params_from_c(p) -> SessionParams:
    return SessionParams(Strategy(p.strategy), p.n_seq, p.n_draft_max, p.n_draft_min, p.p_min, p.draft_vocab)


def session_stats_from_c(s, n_draft_max: int) -> SessionStats:
    return SessionStats(
        s.n_begin,
        s.n_process,
        s.n_draft,
        s.n_proposals,
        s.n_drafted,
        s.n_accept,
        s.n_accepted,
        tuple(s.n_accepted_at[:n_draft_max]),
        s.t_begin_us,
        s.t_process_us,
        s.t_draft_us,
        s.t_accept_us,
    )


def sequence_stats_from_c(s, n_draft_max: int) -> SequenceStats:
    return SequenceStats(
        s.n_generated,
        s.n_steps,
        s.n_drafted,
        s.n_accepted,
        tuple(s.n_proposed_at[:n_draft_max]),
        tuple(s.n_accepted_at[:n_draft_max]),
        tuple(s.n_reached_at[:n_draft_max]),
    )


def top_logprobs_from_c(ptr, n: int, n_positions: int) -> Optional[list]:
    """n entries, position after position, as one list per position."""
    if not ptr or n_positions == 0:
        return None if not ptr else []
    k = n // n_positions
    flat = [TokenLogprob(e.token, e.logprob) for e in ptr[:n]]
    return [flat[i * k : (i + 1) * k] for i in range(n_positions)]


def model_info_from_c(i) -> ModelInfo:
    return ModelInfo(
        architecture=i.architecture.decode("utf-8", "replace"),
        name=i.name.decode("utf-8", "replace"),
        file_size=i.file_size,
        n_params=i.n_params,
        n_tensors=i.n_tensors,
        n_vocab=i.n_vocab,
        n_embd=i.n_embd,
        n_layer=i.n_layer,
        n_layer_nextn=i.n_layer_nextn,
        target_layers=tuple(i.target_layers[: i.n_target_layers]),
        target_hidden_size=i.target_hidden_size,
        block_size=i.block_size,
        dflash2=bool(i.dflash2),
        markov_head=bool(i.markov_head),
        strategies=frozenset(s for s in Strategy if i.strategies & (1 << int(s))),
    )
