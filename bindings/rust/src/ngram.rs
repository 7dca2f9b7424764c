//! [`NgramSession`]: n-gram lookup in the history, no draft context.

use std::marker::PhantomData;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::inspect::Strategy;
use crate::model::LlamaContext;
use crate::session::{sealed, Core, SessionConfig, SpeculativeSession};
use crate::sys;

/// A session of an n-gram strategy over a target context alone.
pub struct NgramSession<'ctx, 'tm> {
    core: Core,
    target: &'ctx mut LlamaContext<'tm>,
    _not_send_sync: PhantomData<Rc<()>>,
}

impl<'ctx, 'tm> NgramSession<'ctx, 'tm> {
    /// A session of an n-gram strategy ([`Error::InvalidArgument`] for the others).
    pub fn new(target: &'ctx mut LlamaContext<'tm>, strategy: Strategy, config: SessionConfig) -> Result<Self> {
        if strategy.needs_draft_context() {
            return Err(Error::InvalidArgument { message: format!("{} needs a draft context", strategy) });
        }
        let core = Core::new(target.as_ptr(), std::ptr::null_mut(), strategy, config)?;
        Ok(NgramSession { core, target, _not_send_sync: PhantomData })
    }

    /// Configuration in effect.
    pub fn config(&self) -> SessionConfig {
        self.core.config
    }

    /// Counters and timings.
    pub fn stats(&self) -> crate::SessionStats {
        self.core.stats()
    }

    /// True when no sequence has a pending proposal.
    pub fn is_quiescent(&self) -> bool {
        self.core.is_quiescent()
    }

    /// The target context.
    pub fn target_context(&self) -> &LlamaContext<'tm> {
        self.target
    }
}

impl sealed::Sealed for NgramSession<'_, '_> {}

impl SpeculativeSession for NgramSession<'_, '_> {
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
