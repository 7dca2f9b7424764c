//! Continuous batching (`specdec_engine`): requests that come and go over a
//! session's sequences, or over a bare target context (plain decoding).

use std::marker::PhantomData;
use std::os::raw::c_void;
use std::sync::{Arc, Mutex};

use crate::error::{check, Error, Result};
use crate::generate::{top_logprobs, Completion, GenerateParams, SequenceStats, StopReason, TokenLogprob};
use crate::model::{LlamaContext, LlamaToken};
use crate::session::SpeculativeSession;
use crate::sys;

/// `specdec_engine_params`; defaults equal `specdec_engine_default_params()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineParams {
    /// Sequence slots `[0, n_seq)`; 0: all of the session's.
    pub n_seq: u32,
    /// Requests waiting for a slot at most (>= 1).
    pub max_waiting: u32,
    /// Prompt tokens decoded per request per step; 0: the whole prompt.
    pub n_prefill_chunk: i32,
    /// A finished request's positions stay until its slot is taken again.
    pub keep_finished: bool,
    /// A new request reuses the longest prefix a free slot holds.
    pub reuse_prompts: bool,
    /// Host bytes for the prompt cache (with `reuse_prompts`): what a slot
    /// held before another prompt took it, loaded back for a prompt that
    /// continues it; `u64::MAX`: no bound; 0: no cache.
    pub prompt_cache_bytes: u64,
}

impl Default for EngineParams {
    fn default() -> Self {
        EngineParams { n_seq: 0, max_waiting: 64, n_prefill_chunk: 256, keep_finished: false, reuse_prompts: true, prompt_cache_bytes: 0 }
    }
}

/// An engine event, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A request emitted a token and the text it releases.
    Token { id: u64, seq_id: i32, token: LlamaToken, piece: Vec<u8>, logprob: Option<f32>, top_logprobs: Option<Vec<TokenLogprob>> },
    /// A request left; its result.
    Finished {
        id: u64,
        seq_id: i32,
        completion: Completion,
        /// Microseconds from its add to its first token (-1: none) and to its end.
        t_first_token_us: i64,
        t_total_us: i64,
        /// Prompt tokens taken from the slot's memory, not decoded.
        n_prompt_cached: usize,
    },
}

impl Event {
    /// The request it belongs to.
    pub fn id(&self) -> u64 {
        match self {
            Event::Token { id, .. } | Event::Finished { id, .. } => *id,
        }
    }
}

struct Collector {
    events: Vec<Event>,
    n_draft_max: i32,
}

unsafe extern "C" fn on_event(e: *const sys::specdec_engine_event, user: *mut c_void) -> bool {
    let c = &mut *(user as *mut Collector);
    let e = &*e;
    let n_draft_max = c.n_draft_max;
    // Nothing here panics short of allocation failure; catch it anyway rather than unwind into C.
    let event = std::panic::catch_unwind(|| convert(e, n_draft_max));
    if let Ok(ev) = event {
        c.events.push(ev);
    }
    true
}

unsafe fn convert(e: &sys::specdec_engine_event, n_draft_max: i32) -> Event {
    let bytes = |p: *const std::os::raw::c_char, n: usize| if n == 0 { Vec::new() } else { std::slice::from_raw_parts(p as *const u8, n).to_vec() };
    if e.type_ == sys::SPECDEC_ENGINE_EVENT_TOKEN {
        let logprob = if e.logprob.is_null() { None } else { Some((*e.logprob).logprob) };
        let top = if logprob.is_some() { top_logprobs(e.top_logprobs, e.n_top_logprobs, 1).pop() } else { None };
        return Event::Token { id: e.id, seq_id: e.seq_id, token: LlamaToken(e.token), piece: bytes(e.piece, e.n_piece), logprob, top_logprobs: top };
    }
    let tokens: Vec<LlamaToken> =
        if e.n_tokens == 0 { Vec::new() } else { std::slice::from_raw_parts(e.tokens, e.n_tokens).iter().map(|t| LlamaToken(*t)).collect() };
    let logprobs = if e.logprobs.is_null() { None } else { Some(std::slice::from_raw_parts(e.logprobs, e.n_tokens).to_vec()) };
    let top = logprobs.as_ref().map(|_| top_logprobs(e.top_logprobs, e.n_top_logprobs, tokens.len()));
    Event::Finished {
        id: e.id,
        seq_id: e.seq_id,
        completion: Completion {
            tokens,
            text: bytes(e.text, e.n_text),
            stop: StopReason::from_raw(e.stop),
            stats: SequenceStats::from_c(&e.stats, n_draft_max),
            logprobs,
            top_logprobs: top,
        },
        t_first_token_us: e.times.t_first_token_us,
        t_total_us: e.times.t_total_us,
        n_prompt_cached: e.n_prompt_cached,
    }
}

struct Shared(*mut sys::specdec_engine);
// SAFETY: specdec_engine_cancel is thread-safe; the pointer is only
// dereferenced by C, under the mutex, while the engine lives.
unsafe impl Send for Shared {}

/// Cancels an engine's requests from any thread (`specdec_engine_cancel`).
/// Outliving the engine is harmless: it then does nothing.
#[derive(Clone)]
pub struct Canceller(Arc<Mutex<Shared>>);

impl Canceller {
    /// Asks request `id` to stop; it ends at the next step with
    /// [`StopReason::Cancelled`]. `Ok(false)`: the engine is gone.
    pub fn cancel(&self, id: u64) -> Result<bool> {
        let guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if guard.0.is_null() {
            return Ok(false);
        }
        // SAFETY: the engine is alive while the pointer is non-null (Drop nulls it under this lock).
        check(unsafe { sys::specdec_engine_cancel(guard.0, id) })?;
        Ok(true)
    }
}

/// An engine over a session (or a plain context), borrowed exclusively for
/// the engine's lifetime `'s`. One thread at a time; cancel from others with
/// a [`Canceller`].
pub struct Engine<'s> {
    shared: Arc<Mutex<Shared>>,
    raw: *mut sys::specdec_engine,
    collector: Box<Collector>,
    _borrow: PhantomData<&'s mut ()>,
}

impl<'s> Engine<'s> {
    /// An engine drafting and verifying through `session`.
    pub fn new<S: SpeculativeSession + ?Sized>(session: &'s mut S, params: EngineParams) -> Result<Engine<'s>> {
        let n_draft_max = session.config().n_draft_max;
        let (s, t) = session.raw_pointers();
        Self::init(s, t, params, n_draft_max)
    }

    /// An engine of plain decoding over `target` alone (the reference).
    pub fn plain(target: &'s mut LlamaContext<'_>, params: EngineParams) -> Result<Engine<'s>> {
        Self::init(std::ptr::null_mut(), target.as_ptr(), params, 0)
    }

    fn init(session: *mut sys::specdec_session, target: *mut sys::llama_context, params: EngineParams, n_draft_max: i32) -> Result<Engine<'s>> {
        let mut collector = Box::new(Collector { events: Vec::new(), n_draft_max });
        let p = sys::specdec_engine_params {
            n_seq: params.n_seq,
            max_waiting: params.max_waiting,
            n_prefill_chunk: params.n_prefill_chunk,
            keep_finished: params.keep_finished,
            reuse_prompts: params.reuse_prompts,
            prompt_cache_bytes: params.prompt_cache_bytes,
        };
        let mut out = std::ptr::null_mut();
        let user = &mut *collector as *mut Collector as *mut c_void;
        // SAFETY: the session/target are borrowed for 's; the collector is boxed (stable address) and lives as long as the engine.
        check(unsafe { sys::specdec_engine_init(session, target, &p, Some(on_event), user, &mut out) })?;
        Ok(Engine { shared: Arc::new(Mutex::new(Shared(out))), raw: out, collector, _borrow: PhantomData })
    }

    /// Queues a request; returns its id.
    pub fn add(&mut self, prompt: &[LlamaToken], params: &GenerateParams) -> Result<u64> {
        let (p, _strings, _ptrs) = params.to_c()?;
        let mut id = 0u64;
        // SAFETY: the prompt and params outlive the call (the engine copies them).
        check(unsafe { sys::specdec_engine_add(self.raw, prompt.as_ptr().cast(), prompt.len(), &p, &mut id) })?;
        Ok(id)
    }

    /// Queues `n` requests of one prompt, decoded once, request i seeded
    /// `params.seed + i` (see `specdec_engine_add_n`); returns the first id,
    /// the others follow it.
    pub fn add_n(&mut self, prompt: &[LlamaToken], params: &GenerateParams, n: u32) -> Result<u64> {
        let (p, _strings, _ptrs) = params.to_c()?;
        let mut id = 0u64;
        // SAFETY: the prompt and params outlive the call (the engine copies them).
        check(unsafe { sys::specdec_engine_add_n(self.raw, prompt.as_ptr().cast(), prompt.len(), &p, n, &mut id) })?;
        Ok(id)
    }

    /// Asks a request to stop (also [`Canceller::cancel`] from other threads).
    pub fn cancel(&self, id: u64) -> Result<()> {
        // SAFETY: alive.
        check(unsafe { sys::specdec_engine_cancel(self.raw, id) })
    }

    /// Holds request `id` (`paused`: it keeps its slot, nothing of it is
    /// decoded or emitted) or lets it go on, from the next step; its output
    /// is what it would have been unpaused (`specdec_engine_pause`).
    pub fn pause(&self, id: u64, paused: bool) -> Result<()> {
        // SAFETY: alive.
        check(unsafe { sys::specdec_engine_pause(self.raw, id, paused) })
    }

    /// A handle that cancels from any thread.
    pub fn canceller(&self) -> Canceller {
        Canceller(self.shared.clone())
    }

    /// One step; its events in order.
    pub fn step(&mut self) -> Result<Vec<Event>> {
        // SAFETY: alive; the callback writes into the collector, which we own.
        let status = unsafe { sys::specdec_engine_step(self.raw) };
        self.finish(status)
    }

    /// Steps until no request runs or waits; every event.
    pub fn run_until_idle(&mut self) -> Result<Vec<Event>> {
        // SAFETY: as above.
        let status = unsafe { sys::specdec_engine_run_until_idle(self.raw) };
        self.finish(status)
    }

    fn finish(&mut self, status: sys::specdec_status) -> Result<Vec<Event>> {
        let events = std::mem::take(&mut self.collector.events);
        if status != sys::SPECDEC_STATUS_OK {
            return Err(Error::from_status(status, crate::error::last_error()));
        }
        Ok(events)
    }

    /// Whether a request runs or waits.
    pub fn has_work(&self) -> bool {
        // SAFETY: alive.
        unsafe { sys::specdec_engine_has_work(self.raw) }
    }
}

impl Drop for Engine<'_> {
    fn drop(&mut self) {
        let mut guard = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        guard.0 = std::ptr::null_mut();
        // SAFETY: once; no canceller can reach it any more.
        unsafe { sys::specdec_engine_free(self.raw) }
    }
}
