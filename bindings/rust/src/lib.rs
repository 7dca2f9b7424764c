//! specdec for Rust: lossless speculative decoding on llama.cpp, over
//! libspecdec's C ABI (`include/specdec/specdec.h`).
//!
//! The safe API has the shape of the seeds this project was specified from
//! (`MtpSession`, `Eagle3Session` with DFlash constructors, configs with
//! `with_n_min` / `with_p_min`, `begin` / `process` / `draft` / `accept` /
//! `decode_target_and_process` / `is_quiescent`, speculative state capture
//! and restore, KV range clears), with every failure one variant of
//! [`Error`] per specdec status. Above it: [`SpeculativeSession::generate`]
//! (the whole loop, streamed) and the continuous-batching [`Engine`].
//!
//! Lifetimes: a session exclusively borrows its two contexts, which borrow
//! their models, so no session can outlive them:
//!
//! ```compile_fail
//! use specdec::*;
//! let backend = LlamaBackend::init();
//! let model = LlamaModel::load_from_file(&backend, "t.gguf", &LlamaModelParams::default()).unwrap();
//! let draft_model = LlamaModel::load_from_file(&backend, "d.gguf", &LlamaModelParams::default()).unwrap();
//! let session = {
//!     let mut target = model.new_context(&backend, LlamaContextParams::default()).unwrap();
//!     let mut draft = target.new_draft_context(Some(&draft_model), Strategy::Eagle3, 1, 3, LlamaContextParams::default()).unwrap();
//!     Eagle3Session::new(&mut target, &mut draft, 1, 3).unwrap()
//! }; // error: `target` does not live long enough
//! ```
//!
//! The crate links `libspecdec` and `libllama` from `$SPECDEC_LIB_DIR`, or
//! from the build directory (`$SPECDEC_BUILD_DIR`, default the checkout's
//! `build/`); see `build.rs`.

pub mod sys;

mod eagle;
mod engine;
mod error;
mod generate;
mod inspect;
mod model;
mod mtp;
mod ngram;
mod session;

pub use eagle::{DFlashSession, Eagle3Session, Eagle3SessionConfig, Eagle3SessionError};
pub use engine::{Canceller, Engine, EngineParams, Event};
pub use error::{Error, Result, StatusKind};
pub use generate::{generate_plain, AcceptMode, OnPiece, Completion, DraftLength, GenerateError, GenerateParams, Generation, SequenceStats, StopReason, TokenLogprob};
pub use inspect::{check_exact, check_pair, detect_strategy, inspect, inspect_buffer, ModelInfo, Strategy};
pub use model::{LlamaBackend, LlamaBatch, LlamaContext, LlamaContextParams, LlamaContextType, LlamaModel, LlamaModelParams, LlamaToken};
pub use mtp::{MtpSession, MtpSessionConfig, MtpSessionError};
pub use ngram::NgramSession;
pub use session::{ContextRole, DraftRequest, DraftSampling, SessionConfig, SessionStats, SpeculativeSession, TokenProb};

/// Most tokens of history per sequence (`SPECDEC_MAX_PROMPT_TOKENS`; the seeds' `MAX_SPECULATIVE_PROMPT_TOKENS`).
pub const MAX_SPECULATIVE_PROMPT_TOKENS: usize = sys::SPECDEC_MAX_PROMPT_TOKENS;

/// The loaded library's version (`specdec_version`).
pub fn version() -> &'static str {
    // SAFETY: static storage.
    unsafe { std::ffi::CStr::from_ptr(sys::specdec_version()) }.to_str().unwrap_or("")
}

/// Turns llama.cpp's batch-invariant CPU kernels on or off (`specdec_set_exact_kernels`; on by default).
pub fn set_exact_kernels(exact: bool) -> Result<()> {
    // SAFETY: process-wide switch; call while no decode runs.
    error::check(unsafe { sys::specdec_set_exact_kernels(exact) })
}
