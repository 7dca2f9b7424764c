//! [`MtpSession`]: a target context and an MTP draft context over the same
//! model, drafting with the model's own NextN heads (the seeds' `mtp.rs`
//! API, over specdec's C ABI instead of a shim around upstream's `common/`).
//!
//! ```no_run
//! use specdec::{LlamaBackend, LlamaContextParams, LlamaModel, LlamaModelParams, MtpSession, MtpSessionConfig, Strategy};
//! # fn f() -> Result<(), specdec::Error> {
//! let backend = LlamaBackend::init();
//! let model = LlamaModel::load_from_file(&backend, "qwen3.6.gguf", &LlamaModelParams::default().with_load_mtp(true))?;
//! let config = MtpSessionConfig::new(1, 3).with_p_min(0.0);
//! let mut target = model.new_context(&backend, LlamaContextParams::default().with_n_rs_seq(3))?;
//! let mut draft = target.new_draft_context(None, Strategy::Mtp, 1, 3, LlamaContextParams::default())?;
//! let mut session = MtpSession::new_with_config(&mut target, &mut draft, config)?;
//! # Ok(()) }
//! ```

use std::marker::PhantomData;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::inspect::Strategy;
use crate::model::{LlamaContext, LlamaContextType};
use crate::session::{sealed, session_methods, Core, SessionConfig, SpeculativeSession};
use crate::sys;

/// Parameters for [`MtpSession::new_with_config`] (`n_seq`, `n_draft_max`, `n_min`, `p_min`).
pub type MtpSessionConfig = SessionConfig;

/// Errors of [`MtpSession`]: the crate's [`Error`], one variant per specdec status.
pub type MtpSessionError = Error;

/// An MTP draft session. Exclusively borrows both contexts for its lifetime,
/// so neither can be used elsewhere, moved or dropped while it lives. Neither
/// `Send` nor `Sync`.
pub struct MtpSession<'ctx, 'tm> {
    core: Core,
    target: &'ctx mut LlamaContext<'tm>,
    draft: &'ctx mut LlamaContext<'tm>,
    _not_send_sync: PhantomData<Rc<()>>,
}

impl<'ctx, 'tm> MtpSession<'ctx, 'tm> {
    /// [`new_with_config`](Self::new_with_config) with `n_min` 0 and `p_min` 0.
    pub fn new(target: &'ctx mut LlamaContext<'tm>, draft: &'ctx mut LlamaContext<'tm>, n_seq: u32, n_draft_max: i32) -> Result<Self> {
        Self::new_with_config(target, draft, MtpSessionConfig::new(n_seq, n_draft_max))
    }

    /// A session over `target` (a default context) and `draft` (an MTP
    /// context over the same model, e.g. from
    /// [`LlamaContext::new_draft_context`]). The configuration is checked
    /// first ([`Error::InvalidConfig`]), then every compatibility rule
    /// ([`Error::WrongContextType`], [`Error::SeqCapacity`], ...).
    pub fn new_with_config(
        target: &'ctx mut LlamaContext<'tm>,
        draft: &'ctx mut LlamaContext<'tm>,
        config: MtpSessionConfig,
    ) -> Result<Self> {
        let core = Core::new(target.as_ptr(), draft.as_ptr(), Strategy::Mtp, config)?;
        Ok(MtpSession { core, target, draft, _not_send_sync: PhantomData })
    }

    session_methods!();

    /// The draft context, reached through the session (which borrows it exclusively).
    pub fn draft_context_mut(&mut self) -> &mut LlamaContext<'tm> {
        self.draft
    }

    /// Re-ranks the restricted draft vocabulary
    /// ([`MtpSessionConfig::with_draft_vocab`]) by a count per token of the
    /// vocabulary (`specdec_session_rank_draft_vocab`): the subset becomes
    /// the most counted tokens (ties and uncounted tokens in the
    /// tokenizer's order); only the rows of the tokens that enter are
    /// copied. Returns how many entered. Between steps only:
    /// [`Error::ProposalPending`] while a proposal awaits `accept`;
    /// [`Error::InvalidConfig`] without a restricted vocabulary;
    /// [`Error::InvalidArgument`] for `counts.len()` other than the
    /// vocabulary's size.
    pub fn rank_draft_vocab(&mut self, counts: &[u64]) -> Result<i32> {
        self.core.rank_draft_vocab(counts)
    }

    /// NextN heads of the target (1 for most models).
    pub fn n_nextn_heads(&self) -> i32 {
        self.core.n_nextn_heads()
    }

    /// Selects the NextN head the draft context runs (the seeds'
    /// `set_nextn_layer_offset`), `0..n_nextn_heads()`.
    pub fn set_nextn_head(&mut self, head: i32) -> Result<()> {
        self.core.set_nextn_head(head)
    }

    /// Whether the draft context was made as an MTP context.
    pub fn draft_is_mtp(&self) -> bool {
        self.draft.context_type() == LlamaContextType::Mtp
    }
}

impl sealed::Sealed for MtpSession<'_, '_> {}

impl SpeculativeSession for MtpSession<'_, '_> {
    fn strategy(&self) -> Strategy {
        Strategy::Mtp
    }
    fn config(&self) -> SessionConfig {
        self.core.config
    }
    fn raw_pointers(&mut self) -> (*mut sys::specdec_session, *mut sys::llama_context) {
        (self.core.ptr(), self.target.as_ptr())
    }
}

impl std::fmt::Debug for MtpSession<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MtpSession").field("config", &self.core.config).finish_non_exhaustive()
    }
}
