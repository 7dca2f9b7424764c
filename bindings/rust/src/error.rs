//! specdec's statuses as one Rust error enum.
//!
//! Every failing `specdec_status` has exactly one [`Error`] variant, and
//! [`Error::status`] gives it back: the mapping is one to one (a test walks
//! every status of the header). Variants keep the seeds' names and fields
//! where the seeds had the condition (`BadSeqId { seq_id, n_seq }`,
//! `ProposalPending { seq_id }`, `NoPendingProposal`, `AcceptedTooMany`,
//! `PromptTooLong`, `InvalidConfig`, `Decode`); the rest are named after
//! their status. Each carries the library's message (`specdec_last_error`),
//! which says what to change.

use std::ffi::CStr;
use std::fmt;

use crate::sys;

/// The kind a status belongs to (`specdec_status_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusKind {
    /// A value outside its documented range.
    Configuration,
    /// The call is not allowed in the session's or engine's current state.
    Lifecycle,
    /// The models or contexts cannot serve the strategy.
    Compatibility,
    /// A checkpoint blob was rejected; the session is unchanged.
    State,
    /// llama.cpp or the system failed.
    Native,
}

/// Errors of every specdec call. One variant per failing `specdec_status`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// `SPECDEC_STATUS_INVALID_ARGUMENT`: null pointer, bad enum, malformed batch, bad parameter.
    InvalidArgument { message: String },
    /// `SPECDEC_STATUS_INVALID_CONFIG`: a session parameter is out of range (the message names it).
    InvalidConfig { message: String },
    /// `SPECDEC_STATUS_UNREPRESENTABLE_TEXT`: the vocabulary has no token for a character of the text
    /// (the message names it and its byte offset).
    UnrepresentableText { message: String },
    /// `SPECDEC_STATUS_BUFFER_TOO_SMALL`: an output buffer holds less than the size reported
    /// (the crate sizes its own buffers).
    BufferTooSmall { message: String },
    /// `SPECDEC_STATUS_BAD_SEQ_ID`: a sequence id outside `[0, n_seq)`.
    BadSeqId { seq_id: i32, n_seq: u32, message: String },
    /// `SPECDEC_STATUS_PROPOSAL_PENDING`: a proposal awaits `accept`.
    ProposalPending { seq_id: i32, message: String },
    /// `SPECDEC_STATUS_NO_PROPOSAL`: `accept` without a pending proposal.
    NoPendingProposal { seq_id: i32, message: String },
    /// `SPECDEC_STATUS_ACCEPTED_TOO_MANY`: `accept` of more tokens than proposed.
    AcceptedTooMany { accepted: u16, proposed: usize, message: String },
    /// `SPECDEC_STATUS_PROMPT_TOO_LONG`: history beyond `SPECDEC_MAX_PROMPT_TOKENS`.
    PromptTooLong { size: usize, maximum: usize, message: String },
    /// `SPECDEC_STATUS_POSITION_MISMATCH`: `n_past` disagrees with what the session saw.
    PositionMismatch { message: String },
    /// `SPECDEC_STATUS_CONTEXT_FULL`: the target context has no room left.
    ContextFull { message: String },
    /// `SPECDEC_STATUS_QUEUE_FULL`: the engine's waiting queue is full.
    QueueFull { message: String },
    /// `SPECDEC_STATUS_UNKNOWN_REQUEST`: a request id the engine never issued.
    UnknownRequest { message: String },
    /// `SPECDEC_STATUS_WRONG_CONTEXT_TYPE`: e.g. an MTP draft context not of MTP type.
    WrongContextType { message: String },
    /// `SPECDEC_STATUS_SEQ_CAPACITY`: a context holds fewer sequences than `n_seq`.
    SeqCapacity { message: String },
    /// `SPECDEC_STATUS_BATCH_CAPACITY`: `n_batch` / `n_ubatch` below `n_draft_max + 1`.
    BatchCapacity { message: String },
    /// `SPECDEC_STATUS_RECURRENT_SLOTS`: `n_rs_seq` below `n_draft_max` on a recurrent model.
    RecurrentSlots { message: String },
    /// `SPECDEC_STATUS_WIDTH_MISMATCH`: draft input width differs from the target's hidden width.
    WidthMismatch { message: String },
    /// `SPECDEC_STATUS_LAYER_MISMATCH`: draft extraction sites do not fit the target.
    LayerMismatch { message: String },
    /// `SPECDEC_STATUS_VOCAB_MISMATCH`: the vocabularies differ.
    VocabMismatch { message: String },
    /// `SPECDEC_STATUS_MODEL_UNSUPPORTED`: the model lacks what the strategy needs.
    ModelUnsupported { message: String },
    /// `SPECDEC_STATUS_UNAVAILABLE`: the llama.cpp build lacks the feature.
    Unavailable { message: String },
    /// `SPECDEC_STATUS_STATE_MALFORMED`: bad magic, truncated, trailing bytes, bad field.
    StateMalformed { message: String },
    /// `SPECDEC_STATUS_STATE_TOO_LARGE`: above `SPECDEC_MAX_STATE_BYTES`.
    StateTooLarge { message: String },
    /// `SPECDEC_STATUS_STATE_VERSION`: written by an unknown format version.
    StateVersion { message: String },
    /// `SPECDEC_STATUS_STATE_STRATEGY`: written by another strategy.
    StateStrategy { message: String },
    /// `SPECDEC_STATUS_STATE_CONFIG`: written under another configuration.
    StateConfig { message: String },
    /// `SPECDEC_STATUS_STATE_SEQUENCE`: written for another sequence.
    StateSequence { message: String },
    /// `SPECDEC_STATUS_DECODE_FAILED`: `llama_decode` returned non-zero (the seeds' `Decode`).
    Decode { message: String },
    /// `SPECDEC_STATUS_NATIVE_FAILURE`: llama.cpp reported or raised an error.
    NativeFailure { message: String },
    /// `SPECDEC_STATUS_IO_ERROR`: a file could not be read.
    Io { message: String },
    /// `SPECDEC_STATUS_OUT_OF_MEMORY`.
    OutOfMemory { message: String },
    /// `SPECDEC_STATUS_MALFORMED_FILE`: not a readable GGUF file, or one llama.cpp cannot load.
    MalformedFile { message: String },
    /// A status newer than this crate (its number and kind come from the library).
    Unknown { status: i32, message: String },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// What a call knew that the status alone does not say, used to fill the
/// structured variants.
#[derive(Default, Clone, Copy)]
pub(crate) struct Context {
    pub seq_id: Option<i32>,
    pub n_seq: Option<u32>,
    pub accepted: Option<u16>,
    pub proposed: Option<usize>,
    pub size: Option<usize>,
}

impl Error {
    /// The error for a failing status, with `message`.
    pub fn from_status(status: i32, message: impl Into<String>) -> Error {
        Error::build(status, message.into(), Context::default())
    }

    pub(crate) fn build(status: i32, message: String, c: Context) -> Error {
        let seq_id = c.seq_id.unwrap_or(-1);
        match status {
            sys::SPECDEC_STATUS_INVALID_ARGUMENT => Error::InvalidArgument { message },
            sys::SPECDEC_STATUS_INVALID_CONFIG => Error::InvalidConfig { message },
            sys::SPECDEC_STATUS_UNREPRESENTABLE_TEXT => Error::UnrepresentableText { message },
            sys::SPECDEC_STATUS_BUFFER_TOO_SMALL => Error::BufferTooSmall { message },
            sys::SPECDEC_STATUS_BAD_SEQ_ID => Error::BadSeqId { seq_id, n_seq: c.n_seq.unwrap_or(0), message },
            sys::SPECDEC_STATUS_PROPOSAL_PENDING => Error::ProposalPending { seq_id, message },
            sys::SPECDEC_STATUS_NO_PROPOSAL => Error::NoPendingProposal { seq_id, message },
            sys::SPECDEC_STATUS_ACCEPTED_TOO_MANY => Error::AcceptedTooMany {
                accepted: c.accepted.unwrap_or(0),
                proposed: c.proposed.unwrap_or(0),
                message,
            },
            sys::SPECDEC_STATUS_PROMPT_TOO_LONG => Error::PromptTooLong {
                size: c.size.unwrap_or(0),
                maximum: sys::SPECDEC_MAX_PROMPT_TOKENS,
                message,
            },
            sys::SPECDEC_STATUS_POSITION_MISMATCH => Error::PositionMismatch { message },
            sys::SPECDEC_STATUS_CONTEXT_FULL => Error::ContextFull { message },
            sys::SPECDEC_STATUS_QUEUE_FULL => Error::QueueFull { message },
            sys::SPECDEC_STATUS_UNKNOWN_REQUEST => Error::UnknownRequest { message },
            sys::SPECDEC_STATUS_WRONG_CONTEXT_TYPE => Error::WrongContextType { message },
            sys::SPECDEC_STATUS_SEQ_CAPACITY => Error::SeqCapacity { message },
            sys::SPECDEC_STATUS_BATCH_CAPACITY => Error::BatchCapacity { message },
            sys::SPECDEC_STATUS_RECURRENT_SLOTS => Error::RecurrentSlots { message },
            sys::SPECDEC_STATUS_WIDTH_MISMATCH => Error::WidthMismatch { message },
            sys::SPECDEC_STATUS_LAYER_MISMATCH => Error::LayerMismatch { message },
            sys::SPECDEC_STATUS_VOCAB_MISMATCH => Error::VocabMismatch { message },
            sys::SPECDEC_STATUS_MODEL_UNSUPPORTED => Error::ModelUnsupported { message },
            sys::SPECDEC_STATUS_UNAVAILABLE => Error::Unavailable { message },
            sys::SPECDEC_STATUS_STATE_MALFORMED => Error::StateMalformed { message },
            sys::SPECDEC_STATUS_STATE_TOO_LARGE => Error::StateTooLarge { message },
            sys::SPECDEC_STATUS_STATE_VERSION => Error::StateVersion { message },
            sys::SPECDEC_STATUS_STATE_STRATEGY => Error::StateStrategy { message },
            sys::SPECDEC_STATUS_STATE_CONFIG => Error::StateConfig { message },
            sys::SPECDEC_STATUS_STATE_SEQUENCE => Error::StateSequence { message },
            sys::SPECDEC_STATUS_DECODE_FAILED => Error::Decode { message },
            sys::SPECDEC_STATUS_NATIVE_FAILURE => Error::NativeFailure { message },
            sys::SPECDEC_STATUS_IO_ERROR => Error::Io { message },
            sys::SPECDEC_STATUS_OUT_OF_MEMORY => Error::OutOfMemory { message },
            sys::SPECDEC_STATUS_MALFORMED_FILE => Error::MalformedFile { message },
            other => Error::Unknown { status: other, message },
        }
    }

    /// The `specdec_status` this error stands for.
    pub fn status(&self) -> i32 {
        match self {
            Error::InvalidArgument { .. } => sys::SPECDEC_STATUS_INVALID_ARGUMENT,
            Error::InvalidConfig { .. } => sys::SPECDEC_STATUS_INVALID_CONFIG,
            Error::UnrepresentableText { .. } => sys::SPECDEC_STATUS_UNREPRESENTABLE_TEXT,
            Error::BufferTooSmall { .. } => sys::SPECDEC_STATUS_BUFFER_TOO_SMALL,
            Error::BadSeqId { .. } => sys::SPECDEC_STATUS_BAD_SEQ_ID,
            Error::ProposalPending { .. } => sys::SPECDEC_STATUS_PROPOSAL_PENDING,
            Error::NoPendingProposal { .. } => sys::SPECDEC_STATUS_NO_PROPOSAL,
            Error::AcceptedTooMany { .. } => sys::SPECDEC_STATUS_ACCEPTED_TOO_MANY,
            Error::PromptTooLong { .. } => sys::SPECDEC_STATUS_PROMPT_TOO_LONG,
            Error::PositionMismatch { .. } => sys::SPECDEC_STATUS_POSITION_MISMATCH,
            Error::ContextFull { .. } => sys::SPECDEC_STATUS_CONTEXT_FULL,
            Error::QueueFull { .. } => sys::SPECDEC_STATUS_QUEUE_FULL,
            Error::UnknownRequest { .. } => sys::SPECDEC_STATUS_UNKNOWN_REQUEST,
            Error::WrongContextType { .. } => sys::SPECDEC_STATUS_WRONG_CONTEXT_TYPE,
            Error::SeqCapacity { .. } => sys::SPECDEC_STATUS_SEQ_CAPACITY,
            Error::BatchCapacity { .. } => sys::SPECDEC_STATUS_BATCH_CAPACITY,
            Error::RecurrentSlots { .. } => sys::SPECDEC_STATUS_RECURRENT_SLOTS,
            Error::WidthMismatch { .. } => sys::SPECDEC_STATUS_WIDTH_MISMATCH,
            Error::LayerMismatch { .. } => sys::SPECDEC_STATUS_LAYER_MISMATCH,
            Error::VocabMismatch { .. } => sys::SPECDEC_STATUS_VOCAB_MISMATCH,
            Error::ModelUnsupported { .. } => sys::SPECDEC_STATUS_MODEL_UNSUPPORTED,
            Error::Unavailable { .. } => sys::SPECDEC_STATUS_UNAVAILABLE,
            Error::StateMalformed { .. } => sys::SPECDEC_STATUS_STATE_MALFORMED,
            Error::StateTooLarge { .. } => sys::SPECDEC_STATUS_STATE_TOO_LARGE,
            Error::StateVersion { .. } => sys::SPECDEC_STATUS_STATE_VERSION,
            Error::StateStrategy { .. } => sys::SPECDEC_STATUS_STATE_STRATEGY,
            Error::StateConfig { .. } => sys::SPECDEC_STATUS_STATE_CONFIG,
            Error::StateSequence { .. } => sys::SPECDEC_STATUS_STATE_SEQUENCE,
            Error::Decode { .. } => sys::SPECDEC_STATUS_DECODE_FAILED,
            Error::NativeFailure { .. } => sys::SPECDEC_STATUS_NATIVE_FAILURE,
            Error::Io { .. } => sys::SPECDEC_STATUS_IO_ERROR,
            Error::OutOfMemory { .. } => sys::SPECDEC_STATUS_OUT_OF_MEMORY,
            Error::MalformedFile { .. } => sys::SPECDEC_STATUS_MALFORMED_FILE,
            Error::Unknown { status, .. } => *status,
        }
    }

    /// The library's message.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument { message }
            | Error::InvalidConfig { message }
            | Error::UnrepresentableText { message }
            | Error::BufferTooSmall { message }
            | Error::BadSeqId { message, .. }
            | Error::ProposalPending { message, .. }
            | Error::NoPendingProposal { message, .. }
            | Error::AcceptedTooMany { message, .. }
            | Error::PromptTooLong { message, .. }
            | Error::PositionMismatch { message }
            | Error::ContextFull { message }
            | Error::QueueFull { message }
            | Error::UnknownRequest { message }
            | Error::WrongContextType { message }
            | Error::SeqCapacity { message }
            | Error::BatchCapacity { message }
            | Error::RecurrentSlots { message }
            | Error::WidthMismatch { message }
            | Error::LayerMismatch { message }
            | Error::VocabMismatch { message }
            | Error::ModelUnsupported { message }
            | Error::Unavailable { message }
            | Error::StateMalformed { message }
            | Error::StateTooLarge { message }
            | Error::StateVersion { message }
            | Error::StateStrategy { message }
            | Error::StateConfig { message }
            | Error::StateSequence { message }
            | Error::Decode { message }
            | Error::NativeFailure { message }
            | Error::Io { message }
            | Error::OutOfMemory { message }
            | Error::MalformedFile { message }
            | Error::Unknown { message, .. } => message,
        }
    }

    /// The kind of its status (`specdec_status_kind_of`).
    pub fn kind(&self) -> Option<StatusKind> {
        // SAFETY: a pure function of an integer.
        match unsafe { sys::specdec_status_kind_of(self.status()) } {
            sys::SPECDEC_STATUS_KIND_CONFIGURATION => Some(StatusKind::Configuration),
            sys::SPECDEC_STATUS_KIND_LIFECYCLE => Some(StatusKind::Lifecycle),
            sys::SPECDEC_STATUS_KIND_COMPATIBILITY => Some(StatusKind::Compatibility),
            sys::SPECDEC_STATUS_KIND_STATE => Some(StatusKind::State),
            sys::SPECDEC_STATUS_KIND_NATIVE => Some(StatusKind::Native),
            _ => None,
        }
    }

    /// The status's stable name, e.g. `"PROPOSAL_PENDING"` (`specdec_status_name`).
    pub fn status_name(&self) -> &'static str {
        // SAFETY: static storage, NUL-terminated ASCII.
        unsafe { CStr::from_ptr(sys::specdec_status_name(self.status())) }.to_str().unwrap_or("UNKNOWN")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message())
    }
}

impl std::error::Error for Error {}

/// The calling thread's `specdec_last_error()`.
pub(crate) fn last_error() -> String {
    // SAFETY: valid until the next specdec call on this thread; copied at once.
    unsafe { CStr::from_ptr(sys::specdec_last_error()) }.to_string_lossy().into_owned()
}

/// `Ok(())` for OK, else the error with the last message and what `c` knows.
pub(crate) fn check_with(status: sys::specdec_status, c: Context) -> Result<()> {
    if status == sys::SPECDEC_STATUS_OK {
        Ok(())
    } else {
        Err(Error::build(status, last_error(), c))
    }
}

pub(crate) fn check(status: sys::specdec_status) -> Result<()> {
    check_with(status, Context::default())
}
