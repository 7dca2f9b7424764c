//! [`Eagle3Session`]: a target context and a default context over a
//! separate draft model: EAGLE-3 (fed with three target layers), DFlash /
//! DFlash2 ([`Eagle3Session::new_dflash`]; DFlash2 is recognised from its
//! metadata), and, beyond the seeds, DSpark and classic draft models
//! ([`Eagle3Session::new_with_strategy`]). The seeds' `eagle.rs` API.

use std::marker::PhantomData;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::inspect::Strategy;
use crate::model::LlamaContext;
use crate::session::{sealed, session_methods, Core, SessionConfig, SpeculativeSession};
use crate::sys;

/// Parameters for [`Eagle3Session::new_with_config`].
pub type Eagle3SessionConfig = SessionConfig;

/// Errors of [`Eagle3Session`]: the crate's [`Error`].
pub type Eagle3SessionError = Error;

/// A DFlash draft session: the same type, built with [`Eagle3Session::new_dflash`].
pub type DFlashSession<'ctx, 'tm, 'dm> = Eagle3Session<'ctx, 'tm, 'dm>;

/// A separate-draft-model session. Exclusively borrows both contexts for its
/// lifetime; neither `Send` nor `Sync`.
pub struct Eagle3Session<'ctx, 'tm, 'dm> {
    core: Core,
    target: &'ctx mut LlamaContext<'tm>,
    draft: &'ctx mut LlamaContext<'dm>,
    _not_send_sync: PhantomData<Rc<()>>,
}

impl<'ctx, 'tm, 'dm> Eagle3Session<'ctx, 'tm, 'dm> {
    /// An EAGLE-3 session with `n_min` 0 and `p_min` 0.
    pub fn new(target: &'ctx mut LlamaContext<'tm>, draft: &'ctx mut LlamaContext<'dm>, n_seq: u32, n_draft_max: i32) -> Result<Self> {
        Self::new_with_config(target, draft, Eagle3SessionConfig::new(n_seq, n_draft_max))
    }

    /// An EAGLE-3 session. The draft must name three extraction sites that fit
    /// the target ([`Error::LayerMismatch`]) and read its width
    /// ([`Error::WidthMismatch`]); checked before llama.cpp runs.
    pub fn new_with_config(target: &'ctx mut LlamaContext<'tm>, draft: &'ctx mut LlamaContext<'dm>, config: Eagle3SessionConfig) -> Result<Self> {
        Self::new_with_strategy(target, draft, Strategy::Eagle3, config)
    }

    /// A DFlash (or DFlash2) session with `n_min` 0 and `p_min` 0.
    pub fn new_dflash(target: &'ctx mut LlamaContext<'tm>, draft: &'ctx mut LlamaContext<'dm>, n_seq: u32, n_draft_max: i32) -> Result<Self> {
        Self::new_dflash_with_config(target, draft, Eagle3SessionConfig::new(n_seq, n_draft_max))
    }

    /// A DFlash (or DFlash2) session; `n_draft_max` is lowered to the draft's block size.
    pub fn new_dflash_with_config(target: &'ctx mut LlamaContext<'tm>, draft: &'ctx mut LlamaContext<'dm>, config: Eagle3SessionConfig) -> Result<Self> {
        Self::new_with_strategy(target, draft, Strategy::DFlash, config)
    }

    /// A session for any strategy with a separate draft model: EAGLE3, DFLASH,
    /// DSPARK or DRAFT ([`Error::InvalidArgument`] for the others).
    pub fn new_with_strategy(
        target: &'ctx mut LlamaContext<'tm>,
        draft: &'ctx mut LlamaContext<'dm>,
        strategy: Strategy,
        config: Eagle3SessionConfig,
    ) -> Result<Self> {
        if !matches!(strategy, Strategy::Eagle3 | Strategy::DFlash | Strategy::DSpark | Strategy::Draft) {
            return Err(Error::InvalidArgument { message: format!("{} does not draft with a separate draft model", strategy) });
        }
        let core = Core::new(target.as_ptr(), draft.as_ptr(), strategy, config)?;
        Ok(Eagle3Session { core, target, draft, _not_send_sync: PhantomData })
    }

    session_methods!();

    /// The draft context, reached through the session.
    pub fn draft_context_mut(&mut self) -> &mut LlamaContext<'dm> {
        self.draft
    }

    /// The strategy it runs.
    pub fn strategy(&self) -> Strategy {
        self.core.strategy
    }
}

impl sealed::Sealed for Eagle3Session<'_, '_, '_> {}

impl SpeculativeSession for Eagle3Session<'_, '_, '_> {
    fn strategy(&self) -> Strategy {
        self.core.strategy
    }
    fn config(&self) -> SessionConfig {
        self.core.config
    }
    fn raw_pointers(&mut self) -> (*mut sys::specdec_session, *mut sys::llama_context) {
        (self.core.ptr(), self.target.as_ptr())
    }
}

impl std::fmt::Debug for Eagle3Session<'_, '_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eagle3Session").field("strategy", &self.core.strategy).field("config", &self.core.config).finish_non_exhaustive()
    }
}
