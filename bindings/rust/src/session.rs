//! What every session type shares: the native handle, its configuration,
//! statistics, and the methods of the speculative loop (generated into each
//! session type by `session_methods!`, so each keeps the seeds' signatures).

use std::ptr::NonNull;

use crate::error::{check, check_with, Context, Error, Result};
use crate::inspect::Strategy;
use crate::model::{to_i32, LlamaBatch, LlamaToken};
use crate::sys;

/// Parameters of a session; the seeds' `MtpSessionConfig` /
/// `Eagle3SessionConfig` (both are this type).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionConfig {
    /// Concurrent sequences (usually 1).
    pub n_seq: u32,
    /// Most tokens per proposal (`n_max` upstream), 1..=128.
    pub n_draft_max: i32,
    /// Proposals shorter than this are dropped (`n_min` upstream, default 0).
    pub n_min: i32,
    /// Drafting stops below this draft probability (`p_min` upstream, default 0).
    pub p_min: f32,
    /// The MTP drafter scores only this many tokens of the tokenizer's
    /// ranking (a restricted draft vocabulary); 0: the whole vocabulary;
    /// `SPECDEC_DRAFT_VOCAB_AUTO`: by vocabulary size. Default 0.
    pub draft_vocab: i32,
}

impl SessionConfig {
    /// `n_seq` sequences, proposals of at most `n_draft_max`; `n_min` 0, `p_min` 0.
    #[must_use]
    pub fn new(n_seq: u32, n_draft_max: i32) -> Self {
        SessionConfig { n_seq, n_draft_max, n_min: 0, p_min: 0.0, draft_vocab: 0 }
    }

    /// Sets the minimum proposal length (`n_min` upstream).
    #[must_use]
    pub fn with_n_min(mut self, n_min: i32) -> Self {
        self.n_min = n_min;
        self
    }

    /// Sets the draft probability floor (`p_min` upstream).
    #[must_use]
    pub fn with_p_min(mut self, p_min: f32) -> Self {
        self.p_min = p_min;
        self
    }

    /// Sets the restricted draft vocabulary's size (0: the whole vocabulary).
    #[must_use]
    pub fn with_draft_vocab(mut self, draft_vocab: i32) -> Self {
        self.draft_vocab = draft_vocab;
        self
    }

    pub(crate) fn to_c(self, strategy: Strategy) -> sys::specdec_session_params {
        sys::specdec_session_params {
            strategy: strategy as i32,
            n_seq: self.n_seq,
            n_draft_max: self.n_draft_max,
            n_draft_min: self.n_min,
            p_min: self.p_min,
            draft_vocab: self.draft_vocab,
            draft_vocab_ranking: std::ptr::null(),
            n_draft_vocab_ranking: 0,
        }
    }
}

/// How a drafter samples its tokens for speculative sampling
/// (`specdec_draft_sampling`): the transforms of
/// [`GenerateParams`](crate::GenerateParams), applied to the drafter's own
/// distribution. Draws are a function of (`seed`, the position a token is
/// drafted for): the same seed, state and positions give the same drafts.
/// Only MTP (specdec's own driver) samples and reports its distribution
/// ([`MtpSession::proposal_probs`](crate::MtpSession::proposal_probs)); the
/// other strategies draft their most likely tokens and report none.
/// Values out of range make the draft fail with [`Error::InvalidArgument`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DraftSampling {
    /// `>= SPECDEC_MIN_SAMPLING_TEMPERATURE` (1e-4); lower drafts greedily, as with no sampling.
    pub temperature: f32,
    /// Keep the k most likely tokens; `<= 0`: off.
    pub top_k: i32,
    /// Nucleus mass, `(0, 1]`; 1: off.
    pub top_p: f32,
    /// Drop tokens below `min_p` x the top probability, `[0, 1)`; 0: off.
    pub min_p: f32,
    /// Seed of the draws.
    pub seed: u64,
}

impl Default for DraftSampling {
    /// Temperature 1, no truncation, seed 0: the drafter's distribution as it is.
    fn default() -> Self {
        DraftSampling { temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, seed: 0 }
    }
}

impl DraftSampling {
    /// Sampling at `temperature` with `seed`, no truncation.
    #[must_use]
    pub fn new(temperature: f32, seed: u64) -> Self {
        DraftSampling { temperature, seed, ..DraftSampling::default() }
    }
    /// Sets `top_k`.
    #[must_use]
    pub fn with_top_k(mut self, top_k: i32) -> Self {
        self.top_k = top_k;
        self
    }
    /// Sets `top_p`.
    #[must_use]
    pub fn with_top_p(mut self, top_p: f32) -> Self {
        self.top_p = top_p;
        self
    }
    /// Sets `min_p`.
    #[must_use]
    pub fn with_min_p(mut self, min_p: f32) -> Self {
        self.min_p = min_p;
        self
    }

    fn to_c(self) -> sys::specdec_draft_sampling {
        sys::specdec_draft_sampling { temperature: self.temperature, top_k: self.top_k, top_p: self.top_p, min_p: self.min_p, seed: self.seed }
    }
}

/// One token of a drafter's distribution (`specdec_token_prob`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenProb {
    pub token: LlamaToken,
    /// Probability, `(0, 1]`.
    pub p: f32,
}

/// One sequence's drafting request for [`MtpSession::draft_many`](crate::MtpSession::draft_many).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DraftRequest {
    /// Sequence to draft for.
    pub seq_id: i32,
    /// Tokens in the target for it (the position of `id_last`).
    pub n_past: i32,
    /// Last token chosen by the target, not yet decoded.
    pub id_last: LlamaToken,
    /// Cap for this proposal; `None`: `n_draft_max`.
    pub n_max: Option<i32>,
    /// `None`: the drafter's most likely tokens. `Some`: each token drawn
    /// from the drafter's distribution under these transforms, reported by
    /// `proposal_probs` where the strategy has one (MTP).
    pub sampling: Option<DraftSampling>,
}

impl DraftRequest {
    /// A request for `seq_id` with no cap and no sampling.
    #[must_use]
    pub fn new(seq_id: i32, n_past: i32, id_last: LlamaToken) -> Self {
        DraftRequest { seq_id, n_past, id_last, n_max: None, sampling: None }
    }
    /// Caps the proposal at `n_max` tokens (0..=n_draft_max).
    #[must_use]
    pub fn with_n_max(mut self, n_max: i32) -> Self {
        self.n_max = Some(n_max);
        self
    }
    /// Samples the draft.
    #[must_use]
    pub fn with_sampling(mut self, sampling: DraftSampling) -> Self {
        self.sampling = Some(sampling);
        self
    }
}

/// `specdec_session_stats`: counters and timings (microseconds) since the session was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStats {
    pub n_begin: u64,
    pub n_process: u64,
    pub n_draft: u64,
    pub n_proposals: u64,
    pub n_drafted: u64,
    pub n_accept: u64,
    pub n_accepted: u64,
    /// `[i]`: proposals whose token `i` was accepted (one entry per draft position).
    pub n_accepted_at: Vec<u64>,
    pub t_begin_us: i64,
    pub t_process_us: i64,
    pub t_draft_us: i64,
    pub t_accept_us: i64,
}

/// Which borrowed context a call addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextRole {
    Target,
    Draft,
}

impl ContextRole {
    fn raw(self) -> sys::specdec_context_role {
        match self {
            ContextRole::Target => sys::SPECDEC_CONTEXT_TARGET,
            ContextRole::Draft => sys::SPECDEC_CONTEXT_DRAFT,
        }
    }
}

/// The native session and what the wrappers need to fill errors.
pub(crate) struct Core {
    raw: NonNull<sys::specdec_session>,
    pub(crate) config: SessionConfig,
    pub(crate) strategy: Strategy,
}

impl Core {
    pub(crate) fn new(
        target: *mut sys::llama_context,
        draft: *mut sys::llama_context,
        strategy: Strategy,
        config: SessionConfig,
    ) -> Result<Core> {
        let params = config.to_c(strategy);
        // Configuration first, so a bad config is InvalidConfig whatever the contexts.
        // SAFETY: a pointer to plain data.
        check(unsafe { sys::specdec_session_params_validate(&params) })?;
        let mut out = std::ptr::null_mut();
        // SAFETY: both contexts are alive for the session's lifetime (borrowed by the wrapper).
        check(unsafe { sys::specdec_session_init(target, draft, &params, &mut out) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::NativeFailure { message: "no session".into() })?;
        // SAFETY: alive.
        let in_effect = unsafe { sys::specdec_session_get_params(raw.as_ptr()) };
        let config = SessionConfig { n_draft_max: in_effect.n_draft_max, ..config };
        Ok(Core { raw, config, strategy })
    }

    pub(crate) fn ptr(&self) -> *mut sys::specdec_session {
        self.raw.as_ptr()
    }

    fn seq(&self, seq_id: i32) -> Context {
        Context { seq_id: Some(seq_id), n_seq: Some(self.config.n_seq), ..Context::default() }
    }

    pub(crate) fn begin(&mut self, seq_id: i32, prompt: &[LlamaToken]) -> Result<()> {
        let c = Context { size: Some(prompt.len()), ..self.seq(seq_id) };
        // SAFETY: LlamaToken is repr(transparent) over i32; the slice outlives the call.
        check_with(unsafe { sys::specdec_session_begin(self.ptr(), seq_id, prompt.as_ptr().cast(), prompt.len()) }, c)
    }

    pub(crate) fn decode_target(&mut self, batch: &LlamaBatch) -> Result<()> {
        // SAFETY: the batch is alive and consistent (LlamaBatch keeps it so).
        check(unsafe { sys::specdec_session_decode_target(self.ptr(), &batch.raw) })
    }

    pub(crate) fn process(&mut self, batch: &LlamaBatch) -> Result<()> {
        // SAFETY: as above.
        check(unsafe { sys::specdec_session_process(self.ptr(), &batch.raw) })
    }

    pub(crate) fn decode_target_and_process(&mut self, batch: &LlamaBatch) -> Result<()> {
        // SAFETY: as above.
        check(unsafe { sys::specdec_session_decode_target_and_process(self.ptr(), &batch.raw) })
    }

    pub(crate) fn draft_many(&mut self, requests: &[DraftRequest]) -> Result<Vec<Vec<LlamaToken>>> {
        // Every request's sampling, at addresses that stay put for the call.
        let sampling: Vec<Option<sys::specdec_draft_sampling>> = requests.iter().map(|r| r.sampling.map(DraftSampling::to_c)).collect();
        let raw: Vec<sys::specdec_draft_request> = requests
            .iter()
            .zip(&sampling)
            .map(|(r, s)| sys::specdec_draft_request {
                seq_id: r.seq_id,
                n_past: r.n_past,
                id_last: r.id_last.0,
                n_max: r.n_max.unwrap_or(-1),
                sampling: s.as_ref().map_or(std::ptr::null(), |s| s as *const sys::specdec_draft_sampling),
            })
            .collect();
        let c = requests.first().map_or(Context::default(), |r| self.seq(r.seq_id));
        // SAFETY: raw.len() requests.
        check_with(unsafe { sys::specdec_session_draft(self.ptr(), raw.as_ptr(), raw.len()) }, c)?;
        requests.iter().map(|r| self.proposal(r.seq_id)).collect()
    }

    pub(crate) fn proposal(&self, seq_id: i32) -> Result<Vec<LlamaToken>> {
        let mut p: *const sys::llama_token = std::ptr::null();
        let mut n = 0usize;
        // SAFETY: out pointers; the tokens are copied before the next call.
        check_with(unsafe { sys::specdec_session_proposal(self.ptr(), seq_id, &mut p, &mut n) }, self.seq(seq_id))?;
        if n == 0 || p.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: n tokens, valid until the next draft/accept/free.
        Ok(unsafe { std::slice::from_raw_parts(p, n) }.iter().map(|t| LlamaToken(*t)).collect())
    }

    pub(crate) fn proposal_probs(&self, seq_id: i32, index: usize) -> Result<Vec<TokenProb>> {
        let mut p: *const sys::specdec_token_prob = std::ptr::null();
        let mut n = 0usize;
        // SAFETY: out pointers; the entries are copied before the next call.
        check_with(unsafe { sys::specdec_session_proposal_probs(self.ptr(), seq_id, index, &mut p, &mut n) }, self.seq(seq_id))?;
        if n == 0 || p.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: n entries, valid until the next draft/accept/free.
        Ok(unsafe { std::slice::from_raw_parts(p, n) }.iter().map(|e| TokenProb { token: LlamaToken(e.token), p: e.p }).collect())
    }

    pub(crate) fn accept(&mut self, seq_id: i32, n_accepted: u16) -> Result<()> {
        // SAFETY: scalars.
        let status = unsafe { sys::specdec_session_accept(self.ptr(), seq_id, n_accepted) };
        if status == sys::SPECDEC_STATUS_ACCEPTED_TOO_MANY {
            let message = crate::error::last_error();
            let proposed = self.proposal(seq_id).map(|p| p.len()).unwrap_or(0);
            return Err(Error::AcceptedTooMany { accepted: n_accepted, proposed, message });
        }
        check_with(status, self.seq(seq_id))
    }

    pub(crate) fn is_quiescent(&self) -> bool {
        // SAFETY: alive.
        unsafe { sys::specdec_session_is_quiescent(self.ptr()) }
    }

    pub(crate) fn state(&self, seq_id: i32) -> Result<Vec<u8>> {
        let c = self.seq(seq_id);
        read_blob(c, |dst, cap, n| unsafe { sys::specdec_session_state_get(self.ptr(), seq_id, dst, cap, n) })
    }

    pub(crate) fn restore_state(&mut self, seq_id: i32, state: &[u8]) -> Result<()> {
        // SAFETY: state.len() readable bytes.
        check_with(unsafe { sys::specdec_session_state_set(self.ptr(), seq_id, state.as_ptr(), state.len()) }, self.seq(seq_id))
    }

    pub(crate) fn context_state(&mut self, role: ContextRole, seq_id: i32, flags: u32) -> Result<Vec<u8>> {
        let c = self.seq(seq_id);
        let ptr = self.ptr();
        read_blob(c, |dst, cap, n| unsafe { sys::specdec_session_context_state_get(ptr, role.raw(), seq_id, flags, dst, cap, n) })
    }

    pub(crate) fn restore_context_state(&mut self, role: ContextRole, seq_id: i32, flags: u32, src: &[u8]) -> Result<()> {
        // SAFETY: src.len() readable bytes.
        check_with(
            unsafe { sys::specdec_session_context_state_set(self.ptr(), role.raw(), seq_id, flags, src.as_ptr(), src.len()) },
            self.seq(seq_id),
        )
    }

    /// The seeds' `*_state_seq_get_size_ext`: the size, 0 on failure.
    pub(crate) fn context_state_size(&mut self, role: ContextRole, seq_id: i32, flags: u32) -> usize {
        let mut n = 0usize;
        // SAFETY: dst NULL with capacity 0 asks for the size.
        let st = unsafe { sys::specdec_session_context_state_get(self.ptr(), role.raw(), seq_id, flags, std::ptr::null_mut(), 0, &mut n) };
        if st == sys::SPECDEC_STATUS_OK {
            n
        } else {
            0
        }
    }

    /// The seeds' `*_state_seq_get_data_ext`: bytes written, 0 on failure (or too small a buffer).
    pub(crate) fn context_state_into(&mut self, role: ContextRole, dst: &mut [u8], seq_id: i32, flags: u32) -> usize {
        let mut n = 0usize;
        // SAFETY: dst.len() writable bytes.
        let st = unsafe { sys::specdec_session_context_state_get(self.ptr(), role.raw(), seq_id, flags, dst.as_mut_ptr(), dst.len(), &mut n) };
        if st == sys::SPECDEC_STATUS_OK {
            n
        } else {
            0
        }
    }

    /// The seeds' `*_state_seq_set_data_ext`: bytes read (`src.len()`), 0 on failure.
    pub(crate) fn context_state_from(&mut self, role: ContextRole, src: &[u8], seq_id: i32, flags: u32) -> usize {
        match self.restore_context_state(role, seq_id, flags, src) {
            Ok(()) => src.len(),
            Err(_) => 0,
        }
    }

    /// The seeds' KV range clear, through the session so that its history is
    /// cut with the target's memory. `Ok(false)`: the memory cannot drop a
    /// partial range (as `llama_memory_seq_rm`'s false).
    pub(crate) fn clear(&mut self, role: ContextRole, seq_id: Option<u32>, p0: Option<u32>, p1: Option<u32>) -> Result<bool> {
        let (p0, p1) = (to_i32(p0, "p0")?, to_i32(p1, "p1")?);
        let seqs: Vec<i32> = match seq_id {
            Some(s) => vec![to_i32(Some(s), "seq_id")?],
            None => (0..self.config.n_seq as i32).collect(),
        };
        for s in seqs {
            // SAFETY: scalars.
            let st = unsafe { sys::specdec_session_remove_range(self.ptr(), role.raw(), s, p0, p1) };
            if st == sys::SPECDEC_STATUS_MODEL_UNSUPPORTED && p0 > 0 {
                return Ok(false);
            }
            check_with(st, self.seq(s))?;
        }
        Ok(true)
    }

    pub(crate) fn stats(&self) -> SessionStats {
        // SAFETY: alive.
        let s = unsafe { sys::specdec_session_get_stats(self.ptr()) };
        let n = (self.config.n_draft_max.max(0) as usize).min(sys::SPECDEC_MAX_DRAFT);
        SessionStats {
            n_begin: s.n_begin,
            n_process: s.n_process,
            n_draft: s.n_draft,
            n_proposals: s.n_proposals,
            n_drafted: s.n_drafted,
            n_accept: s.n_accept,
            n_accepted: s.n_accepted,
            n_accepted_at: s.n_accepted_at[..n].to_vec(),
            t_begin_us: s.t_begin_us,
            t_process_us: s.t_process_us,
            t_draft_us: s.t_draft_us,
            t_accept_us: s.t_accept_us,
        }
    }

    pub(crate) fn reads_target_features(&self) -> bool {
        // SAFETY: alive.
        unsafe { sys::specdec_session_reads_target_features(self.ptr()) }
    }

    pub(crate) fn rank_draft_vocab(&mut self, counts: &[u64]) -> Result<i32> {
        let mut n_entered = 0i32;
        // SAFETY: counts.len() readable counts; n_entered writable.
        check(unsafe { sys::specdec_session_rank_draft_vocab(self.ptr(), counts.as_ptr(), counts.len(), &mut n_entered) })?;
        Ok(n_entered)
    }

    pub(crate) fn n_nextn_heads(&self) -> i32 {
        // SAFETY: alive.
        unsafe { sys::specdec_session_n_nextn_heads(self.ptr()) }
    }

    pub(crate) fn set_nextn_head(&mut self, head: i32) -> Result<()> {
        // SAFETY: scalars.
        check(unsafe { sys::specdec_session_set_nextn_head(self.ptr(), head) })
    }

    pub(crate) fn move_sequence(&mut self, from: i32, to: i32) -> Result<()> {
        // SAFETY: scalars.
        check_with(unsafe { sys::specdec_session_move_sequence(self.ptr(), from, to) }, self.seq(from))
    }

    pub(crate) fn copy_sequence(&mut self, from: i32, to: i32) -> Result<()> {
        // SAFETY: scalars.
        check_with(unsafe { sys::specdec_session_copy_sequence(self.ptr(), from, to) }, self.seq(from))
    }

    pub(crate) fn can_move_sequences(&self) -> bool {
        // SAFETY: alive.
        unsafe { sys::specdec_session_can_move_sequences(self.ptr()) }
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // SAFETY: once, from Drop; the contexts are still borrowed by the wrapper.
        unsafe { sys::specdec_session_free(self.raw.as_ptr()) }
    }
}

fn read_blob(c: Context, mut get: impl FnMut(*mut u8, usize, *mut usize) -> sys::specdec_status) -> Result<Vec<u8>> {
    let mut n = 0usize;
    check_with(get(std::ptr::null_mut(), 0, &mut n), c)?;
    let mut buf = vec![0u8; n];
    check_with(get(buf.as_mut_ptr(), buf.len(), &mut n), c)?;
    buf.truncate(n);
    Ok(buf)
}

/// A session the higher layer ([`generate`](crate::SpeculativeSession::generate),
/// [`Engine`](crate::Engine)) can drive. Implemented by every session type.
pub trait SpeculativeSession: sealed::Sealed {
    /// The strategy in effect.
    fn strategy(&self) -> Strategy;
    /// The configuration in effect (`n_draft_max` may be lower than asked).
    fn config(&self) -> SessionConfig;
    /// Generates from `prompts` (one sequence each) through the session: the
    /// complete draft -> verify -> accept loop (`specdec_generate`). `on_piece`
    /// receives every emitted token's text; returning false stops that sequence.
    fn generate(
        &mut self,
        prompts: &[&[LlamaToken]],
        params: &crate::GenerateParams,
        on_piece: Option<crate::OnPiece<'_>>,
    ) -> std::result::Result<crate::Generation, crate::GenerateError> {
        let (session, target) = self.raw_pointers();
        crate::generate::run(session, target, prompts, params, on_piece, self.config().n_draft_max)
    }
    #[doc(hidden)]
    fn raw_pointers(&mut self) -> (*mut sys::specdec_session, *mut sys::llama_context);
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// The seeds' loop methods, generated into a session type whose fields are
/// `core: Core`, `target: &mut LlamaContext`, `draft`.
macro_rules! session_methods {
    () => {
        /// Session configuration in effect.
        #[must_use]
        pub fn config(&self) -> $crate::SessionConfig {
            self.core.config
        }

        /// Maximum tokens drafted per [`draft`](Self::draft) call (possibly lowered by the drafter).
        #[must_use]
        pub fn n_draft_max(&self) -> i32 {
            self.core.config.n_draft_max
        }

        /// Configured minimum draft tokens (`n_min`).
        #[must_use]
        pub fn n_min(&self) -> i32 {
            self.core.config.n_min
        }

        /// Configured draft probability floor (`p_min`).
        #[must_use]
        pub fn p_min(&self) -> f32 {
            self.core.config.p_min
        }

        /// Configured number of sequences.
        #[must_use]
        pub fn n_seq(&self) -> u32 {
            self.core.config.n_seq
        }

        /// Whether the drafter reads the target's hidden states (which the
        /// session turned on, on both contexts; the seeds' `need_embd_pre_norm`).
        #[must_use]
        pub fn reads_target_features(&self) -> bool {
            self.core.reads_target_features()
        }

        /// The target context.
        pub fn target_context(&self) -> &$crate::LlamaContext<'tm> {
            self.target
        }

        /// Announces a fresh generation for `seq_id`: `prompt` holds the tokens
        /// already decoded into the target. Needs quiescence.
        pub fn begin(&mut self, seq_id: i32, prompt: &[$crate::LlamaToken]) -> $crate::Result<()> {
            self.core.begin(seq_id, prompt)
        }

        /// Hands the session a batch the target has just decoded.
        pub fn process(&mut self, batch: &$crate::LlamaBatch) -> $crate::Result<()> {
            self.core.process(batch)
        }

        /// Decodes one batch on the target (validated first). Allowed while a
        /// proposal is pending: that is how a proposal is verified.
        pub fn decode_target(&mut self, batch: &mut $crate::LlamaBatch) -> $crate::Result<()> {
            self.core.decode_target(batch)
        }

        /// Decodes on the target and hands the same batch to the drafter; a
        /// failed decode is never processed.
        pub fn decode_target_and_process(&mut self, batch: &mut $crate::LlamaBatch) -> $crate::Result<()> {
            self.core.decode_target_and_process(batch)
        }

        /// Drafts up to [`n_draft_max`](Self::n_draft_max) tokens after `id_last`
        /// for `seq_id` (`n_past` tokens in the target). A non-empty proposal is
        /// pending until [`accept`](Self::accept).
        pub fn draft(&mut self, seq_id: i32, n_past: i32, id_last: $crate::LlamaToken) -> $crate::Result<Vec<$crate::LlamaToken>> {
            let mut out = self.core.draft_many(&[$crate::DraftRequest::new(seq_id, n_past, id_last)])?;
            Ok(out.pop().unwrap_or_default())
        }

        /// [`draft`](Self::draft) with each token drawn from the drafter's
        /// distribution under `sampling` (for speculative sampling), which
        /// [`proposal_probs`](Self::proposal_probs) then reports. Strategies
        /// without a distribution (all but MTP) draft as [`draft`](Self::draft)
        /// does and report none.
        pub fn draft_sampled(
            &mut self,
            seq_id: i32,
            n_past: i32,
            id_last: $crate::LlamaToken,
            sampling: $crate::DraftSampling,
        ) -> $crate::Result<Vec<$crate::LlamaToken>> {
            let request = $crate::DraftRequest::new(seq_id, n_past, id_last).with_sampling(sampling);
            let mut out = self.core.draft_many(&[request])?;
            Ok(out.pop().unwrap_or_default())
        }

        /// The latest proposal of `seq_id` (empty when none is pending).
        pub fn proposal(&self, seq_id: i32) -> $crate::Result<Vec<$crate::LlamaToken>> {
            self.core.proposal(seq_id)
        }

        /// The distribution token `index` of `seq_id`'s latest proposal was
        /// drawn from: most likely first, summing to 1, the drafted token among
        /// them; a token not listed has probability 0. Empty when the token was
        /// not sampled (drafted without sampling, or by a strategy without a
        /// distribution: a point mass on the token). Errors: [`Error::BadSeqId`](crate::Error::BadSeqId),
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for `index` >= the proposal's length.
        pub fn proposal_probs(&self, seq_id: i32, index: usize) -> $crate::Result<Vec<$crate::TokenProb>> {
            self.core.proposal_probs(seq_id, index)
        }

        /// Drafts for several sequences in one batched drafter pass.
        pub fn draft_many(&mut self, requests: &[$crate::DraftRequest]) -> $crate::Result<Vec<Vec<$crate::LlamaToken>>> {
            self.core.draft_many(requests)
        }

        /// Reports how many leading tokens of the pending proposal the target kept (0: none).
        pub fn accept(&mut self, seq_id: i32, n_accepted: u16) -> $crate::Result<()> {
            self.core.accept(seq_id, n_accepted)
        }

        /// True when no sequence has a pending proposal.
        #[must_use]
        pub fn is_quiescent(&self) -> bool {
            self.core.is_quiescent()
        }

        /// Captures the session's versioned per-sequence state (needs quiescence).
        /// Checkpoint the target and draft contexts at the same point.
        pub fn speculative_state(&self, seq_id: i32) -> $crate::Result<Vec<u8>> {
            self.core.state(seq_id)
        }

        /// Restores a state from [`speculative_state`](Self::speculative_state),
        /// after the contexts' own state, into the sequence it was captured from
        /// or, where the drafter's state can move ([`can_move_sequences`](Self::can_move_sequences)), any
        /// other (else `Error::StateSequence`). Validated first: on error nothing changed.
        pub fn restore_speculative_state(&mut self, seq_id: i32, state: &[u8]) -> $crate::Result<()> {
            self.core.restore_state(seq_id, state)
        }

        /// Removes positions `[p0, p1)` of a sequence (`None`: every sequence;
        /// `p0` `None`: from 0; `p1` `None`: to the end) from the target's memory
        /// and the session's history. `Ok(false)`: the memory cannot drop a partial range.
        pub fn clear_target_kv_cache_seq(&mut self, seq_id: Option<u32>, p0: Option<u32>, p1: Option<u32>) -> $crate::Result<bool> {
            self.core.clear($crate::ContextRole::Target, seq_id, p0, p1)
        }

        /// The same on the draft context.
        pub fn clear_draft_kv_cache_seq(&mut self, seq_id: Option<u32>, p0: Option<u32>, p1: Option<u32>) -> $crate::Result<bool> {
            self.core.clear($crate::ContextRole::Draft, seq_id, p0, p1)
        }

        /// The target context's sequence-state size (`llama_state_seq_get_size_ext`); 0 on failure.
        pub fn target_state_seq_get_size_ext(&mut self, seq_id: i32, flags: u32) -> usize {
            self.core.context_state_size($crate::ContextRole::Target, seq_id, flags)
        }

        /// Copies the target context's sequence state; bytes written, 0 on failure.
        pub fn target_state_seq_get_data_ext(&mut self, dst: &mut [u8], seq_id: i32, flags: u32) -> usize {
            self.core.context_state_into($crate::ContextRole::Target, dst, seq_id, flags)
        }

        /// Restores the target context's sequence state; bytes read, 0 on failure.
        pub fn target_state_seq_set_data_ext(&mut self, src: &[u8], seq_id: i32, flags: u32) -> usize {
            self.core.context_state_from($crate::ContextRole::Target, src, seq_id, flags)
        }

        /// The draft context's sequence-state size; 0 on failure.
        pub fn draft_state_seq_get_size_ext(&mut self, seq_id: i32, flags: u32) -> usize {
            self.core.context_state_size($crate::ContextRole::Draft, seq_id, flags)
        }

        /// Copies the draft context's sequence state; bytes written, 0 on failure.
        pub fn draft_state_seq_get_data_ext(&mut self, dst: &mut [u8], seq_id: i32, flags: u32) -> usize {
            self.core.context_state_into($crate::ContextRole::Draft, dst, seq_id, flags)
        }

        /// Restores the draft context's sequence state; bytes read, 0 on failure.
        pub fn draft_state_seq_set_data_ext(&mut self, src: &[u8], seq_id: i32, flags: u32) -> usize {
            self.core.context_state_from($crate::ContextRole::Draft, src, seq_id, flags)
        }

        /// A context's sequence state as a vector, or the error saying why not.
        pub fn context_state(&mut self, role: $crate::ContextRole, seq_id: i32, flags: u32) -> $crate::Result<Vec<u8>> {
            self.core.context_state(role, seq_id, flags)
        }

        /// Restores a context's sequence state.
        pub fn restore_context_state(&mut self, role: $crate::ContextRole, seq_id: i32, flags: u32, state: &[u8]) -> $crate::Result<()> {
            self.core.restore_context_state(role, seq_id, flags, state)
        }

        /// Counters and timings since creation (the seeds' `print_stats`, as data).
        #[must_use]
        pub fn stats(&self) -> $crate::SessionStats {
            self.core.stats()
        }

        /// Moves sequence `from` into `to` (target and draft cells, history, drafter state).
        pub fn move_sequence(&mut self, from: i32, to: i32) -> $crate::Result<()> {
            self.core.move_sequence(from, to)
        }

        /// Copies sequence `from` into the empty `to`, `from` unchanged (see `specdec_session_copy_sequence`).
        pub fn copy_sequence(&mut self, from: i32, to: i32) -> $crate::Result<()> {
            self.core.copy_sequence(from, to)
        }

        /// Whether [`move_sequence`](Self::move_sequence) works with this drafter.
        #[must_use]
        pub fn can_move_sequences(&self) -> bool {
            self.core.can_move_sequences()
        }
    };
}

pub(crate) use session_methods;
