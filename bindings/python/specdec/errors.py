"""specdec's statuses as Python exceptions.

One class per specdec_status, grouped under one class per status kind
(configuration, lifecycle, compatibility, state, native), all under
SpecdecError. Each carries the status and the library's message
(specdec_last_error), which says what to change:

    try:
        session = specdec.Session(target, draft, strategy="eagle3")
    except specdec.CompatibilityError as e:   # any compatibility status
        print(e.status.name, e.message)
"""

from __future__ import annotations

import enum

from . import _native


class Status(enum.IntEnum):
    """specdec_status (values are stable and equal the C ones)."""

    OK = 0
    INVALID_ARGUMENT = 100
    INVALID_CONFIG = 101
    UNREPRESENTABLE_TEXT = 102
    BUFFER_TOO_SMALL = 103
    BAD_SEQ_ID = 200
    PROPOSAL_PENDING = 201
    NO_PROPOSAL = 202
    ACCEPTED_TOO_MANY = 203
    PROMPT_TOO_LONG = 204
    POSITION_MISMATCH = 205
    CONTEXT_FULL = 206
    QUEUE_FULL = 207
    UNKNOWN_REQUEST = 208
    WRONG_CONTEXT_TYPE = 300
    SEQ_CAPACITY = 301
    BATCH_CAPACITY = 302
    RECURRENT_SLOTS = 303
    WIDTH_MISMATCH = 304
    LAYER_MISMATCH = 305
    VOCAB_MISMATCH = 306
    MODEL_UNSUPPORTED = 307
    UNAVAILABLE = 308
    STATE_MALFORMED = 400
    STATE_TOO_LARGE = 401
    STATE_VERSION = 402
    STATE_STRATEGY = 403
    STATE_CONFIG = 404
    STATE_SEQUENCE = 405
    DECODE_FAILED = 500
    NATIVE_FAILURE = 501
    IO_ERROR = 502
    OUT_OF_MEMORY = 503
    MALFORMED_FILE = 504


class StatusKind(enum.IntEnum):
    """specdec_status_kind."""

    NONE = 0
    CONFIGURATION = 1
    LIFECYCLE = 2
    COMPATIBILITY = 3
    STATE = 4
    NATIVE = 5


class SpecdecError(Exception):
    """A specdec call failed. `status` says how, `message` what to change."""

    kind = StatusKind.NONE
    status: Status

    def __init__(self, status: int, message: str, partial=None):
        try:
            self.status = Status(status)
        except ValueError:  # a newer library's status: keep the number
            self.status = status  # type: ignore[assignment]
        self.message = message
        # What a call that failed midway produced (specdec_generate keeps the
        # output emitted before the failure), or None.
        self.partial = partial
        name = self.status.name if isinstance(self.status, Status) else str(status)
        super().__init__(f"{name}: {message}" if message else name)


class ConfigurationError(SpecdecError):
    """A value outside its documented range."""

    kind = StatusKind.CONFIGURATION


class LifecycleError(SpecdecError):
    """The call is not allowed in the session's or engine's current state."""

    kind = StatusKind.LIFECYCLE


class CompatibilityError(SpecdecError):
    """The models or contexts cannot serve the strategy."""

    kind = StatusKind.COMPATIBILITY


class StateError(SpecdecError):
    """A checkpoint blob was rejected; the session is unchanged."""

    kind = StatusKind.STATE


class NativeError(SpecdecError):
    """llama.cpp or the system failed."""

    kind = StatusKind.NATIVE


class InvalidArgumentError(ConfigurationError, ValueError):
    """Null pointer, bad enum value, malformed batch, bad parameter."""


class InvalidConfigError(ConfigurationError, ValueError):
    """A session parameter is out of range."""


class UnrepresentableTextError(ConfigurationError, ValueError):
    """The vocabulary has no token for a byte of the text (the message names the character)."""


class BufferTooSmallError(ConfigurationError, ValueError):
    """An output buffer holds less than the size reported (the package sizes its own buffers)."""


class BadSeqIdError(LifecycleError, IndexError):
    """A sequence id outside [0, n_seq)."""


class ProposalPendingError(LifecycleError):
    """A proposal awaits accept()."""


class NoProposalError(LifecycleError):
    """accept() without a pending proposal."""


class AcceptedTooManyError(LifecycleError):
    """accept() of more tokens than proposed."""


class PromptTooLongError(LifecycleError):
    """History beyond SPECDEC_MAX_PROMPT_TOKENS."""


class PositionMismatchError(LifecycleError):
    """n_past disagrees with what the session saw."""


class ContextFullError(LifecycleError):
    """The target context has no room left."""


class QueueFullError(LifecycleError):
    """An engine's waiting queue holds max_waiting requests."""


class UnknownRequestError(LifecycleError, KeyError):
    """A request id the engine never issued."""

    __str__ = Exception.__str__  # KeyError would quote the message


class WrongContextTypeError(CompatibilityError):
    """E.g. an MTP draft context not of MTP type."""


class SeqCapacityError(CompatibilityError):
    """A context holds fewer sequences than n_seq."""


class BatchCapacityError(CompatibilityError):
    """n_batch / n_ubatch below n_draft_max + 1."""


class RecurrentSlotsError(CompatibilityError):
    """n_rs_seq below n_draft_max on a recurrent model."""


class WidthMismatchError(CompatibilityError):
    """Draft input width differs from the target's hidden width."""


class LayerMismatchError(CompatibilityError):
    """Draft extraction sites do not fit the target."""


class VocabMismatchError(CompatibilityError):
    """The vocabularies differ."""


class ModelUnsupportedError(CompatibilityError):
    """The model lacks what the strategy needs."""


class UnavailableError(CompatibilityError):
    """The llama.cpp build lacks the feature asked for."""


class StateMalformedError(StateError):
    """Bad magic, truncated, trailing bytes, bad field."""


class StateTooLargeError(StateError):
    """Above SPECDEC_MAX_STATE_BYTES."""


class StateVersionError(StateError):
    """Written by an unknown format version."""


class StateStrategyError(StateError):
    """Written by another strategy."""


class StateConfigError(StateError):
    """Written under another configuration."""


class StateSequenceError(StateError):
    """Written for another sequence."""


class DecodeFailedError(NativeError):
    """llama_decode returned non-zero."""


class NativeFailureError(NativeError):
    """llama.cpp reported or raised an error."""


class FileReadError(NativeError, OSError):
    """A file could not be read (SPECDEC_STATUS_IO_ERROR)."""

    __str__ = Exception.__str__  # OSError would format its own arguments


class OutOfMemoryError(NativeError, MemoryError):
    """Memory could not be allocated."""


class MalformedFileError(NativeError):
    """Not a readable GGUF file, or one llama.cpp cannot load."""


ERRORS: dict[Status, type[SpecdecError]] = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.INVALID_CONFIG: InvalidConfigError,
    Status.UNREPRESENTABLE_TEXT: UnrepresentableTextError,
    Status.BUFFER_TOO_SMALL: BufferTooSmallError,
    Status.BAD_SEQ_ID: BadSeqIdError,
    Status.PROPOSAL_PENDING: ProposalPendingError,
    Status.NO_PROPOSAL: NoProposalError,
    Status.ACCEPTED_TOO_MANY: AcceptedTooManyError,
    Status.PROMPT_TOO_LONG: PromptTooLongError,
    Status.POSITION_MISMATCH: PositionMismatchError,
    Status.CONTEXT_FULL: ContextFullError,
    Status.QUEUE_FULL: QueueFullError,
    Status.UNKNOWN_REQUEST: UnknownRequestError,
    Status.WRONG_CONTEXT_TYPE: WrongContextTypeError,
    Status.SEQ_CAPACITY: SeqCapacityError,
    Status.BATCH_CAPACITY: BatchCapacityError,
    Status.RECURRENT_SLOTS: RecurrentSlotsError,
    Status.WIDTH_MISMATCH: WidthMismatchError,
    Status.LAYER_MISMATCH: LayerMismatchError,
    Status.VOCAB_MISMATCH: VocabMismatchError,
    Status.MODEL_UNSUPPORTED: ModelUnsupportedError,
    Status.UNAVAILABLE: UnavailableError,
    Status.STATE_MALFORMED: StateMalformedError,
    Status.STATE_TOO_LARGE: StateTooLargeError,
    Status.STATE_VERSION: StateVersionError,
    Status.STATE_STRATEGY: StateStrategyError,
    Status.STATE_CONFIG: StateConfigError,
    Status.STATE_SEQUENCE: StateSequenceError,
    Status.DECODE_FAILED: DecodeFailedError,
    Status.NATIVE_FAILURE: NativeFailureError,
    Status.IO_ERROR: FileReadError,
    Status.OUT_OF_MEMORY: OutOfMemoryError,
    Status.MALFORMED_FILE: MalformedFileError,
}

_BY_KIND = {
    StatusKind.CONFIGURATION: ConfigurationError,
    StatusKind.LIFECYCLE: LifecycleError,
    StatusKind.COMPATIBILITY: CompatibilityError,
    StatusKind.STATE: StateError,
    StatusKind.NATIVE: NativeError,
}


def error_for(status: int, message: str | None = None, partial=None) -> SpecdecError:
    """The exception for a failed status, with specdec_last_error() unless
    `message` is given (read it right after the call: the next specdec call
    on this thread replaces it)."""
    if message is None:
        message = _native.lib.specdec_last_error().decode("utf-8", "replace")
    try:
        cls = ERRORS[Status(status)]
    except (ValueError, KeyError):
        # A status this package does not know yet: its kind from the library.
        cls = _BY_KIND.get(StatusKind(_native.lib.specdec_status_kind_of(status)), SpecdecError)
    return cls(status, message, partial)


def check(status: int) -> None:
    """Raises the exception for a failed status; returns for OK."""
    if status != Status.OK:
        raise error_for(status)
