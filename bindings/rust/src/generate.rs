//! The whole loop: `specdec_generate` for one or many prompts, speculative
//! ([`SpeculativeSession::generate`](crate::SpeculativeSession::generate)) or
//! plain ([`generate_plain`], the reference speculation equals).

use std::ffi::CString;
use std::fmt;
use std::str::FromStr;
use std::os::raw::{c_char, c_void};

use crate::error::{last_error, Error};
use crate::model::{LlamaContext, LlamaToken};
use crate::sys;

/// How many tokens a step drafts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraftLength {
    /// The session's `n_draft_max`.
    Max,
    /// A fixed length, 0..=n_draft_max.
    Fixed(i32),
    /// Chosen per step from measured acceptance and costs (`SPECDEC_N_DRAFT_AUTO`).
    Auto,
}

/// How a drafted token is kept when a request samples (`specdec_accept_mode`;
/// temperature >= `SPECDEC_MIN_SAMPLING_TEMPERATURE`). Greedy requests keep a
/// draft exactly when it is the target's argmax, in either mode.
/// Parses from and displays as `"exact"` / `"rejection"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AcceptMode {
    /// The target draws each verified row with plain decoding's seeded
    /// sampler, and a draft is kept when it equals that draw: seed for seed
    /// the tokens plain decoding gives (a draft `x` is kept with probability `p(x)`).
    Exact,
    /// Speculative sampling: a draft `x` drawn from the drafter's `q` is kept
    /// with probability `min(1, p(x) / q(x))`; after a rejection the token is
    /// drawn from `max(0, p - q)`, normalised. Each token has exactly the
    /// target's distribution `p` (not plain decoding's draws), and a draft is
    /// kept with probability `sum_t min(p(t), q(t))`. The same seed, drafts and
    /// configuration give the same tokens ([`DraftLength::Auto`] picks lengths
    /// from measured costs, so two runs may differ). Drafters without a
    /// distribution (every strategy but MTP) draft their most likely token, a
    /// point mass: `x` is then kept with probability `p(x)`, as in `Exact`.
    #[default]
    Rejection,
}

impl AcceptMode {
    /// The C value.
    #[must_use]
    pub fn raw(self) -> sys::specdec_accept_mode {
        match self {
            AcceptMode::Exact => sys::SPECDEC_ACCEPT_EXACT,
            AcceptMode::Rejection => sys::SPECDEC_ACCEPT_REJECTION,
        }
    }

    /// The mode of a C value; [`Error::InvalidArgument`] for a value that is none.
    pub fn from_raw(v: sys::specdec_accept_mode) -> Result<AcceptMode, Error> {
        match v {
            sys::SPECDEC_ACCEPT_EXACT => Ok(AcceptMode::Exact),
            sys::SPECDEC_ACCEPT_REJECTION => Ok(AcceptMode::Rejection),
            other => Err(Error::InvalidArgument {
                message: format!("accept is {}; it must be SPECDEC_ACCEPT_EXACT or SPECDEC_ACCEPT_REJECTION", other),
            }),
        }
    }

    /// `"exact"` or `"rejection"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            AcceptMode::Exact => "exact",
            AcceptMode::Rejection => "rejection",
        }
    }
}

impl fmt::Display for AcceptMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AcceptMode {
    type Err = Error;

    /// `"exact"` or `"rejection"` (any case); anything else is [`Error::InvalidArgument`].
    fn from_str(s: &str) -> Result<AcceptMode, Error> {
        match s.to_ascii_lowercase().as_str() {
            "exact" => Ok(AcceptMode::Exact),
            "rejection" => Ok(AcceptMode::Rejection),
            _ => Err(Error::InvalidArgument { message: format!("accept is \"{}\"; it must be \"exact\" or \"rejection\"", s) }),
        }
    }
}

/// `specdec_generate_params`; defaults equal `specdec_generate_default_params()`.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateParams {
    /// Most new tokens per sequence.
    pub n_predict: i32,
    /// Tokens drafted per step.
    pub n_draft: DraftLength,
    /// Below `SPECDEC_MIN_SAMPLING_TEMPERATURE`: greedy.
    pub temperature: f32,
    /// Keep the k most likely tokens; <= 0: off.
    pub top_k: i32,
    /// Nucleus mass; 1: off.
    pub top_p: f32,
    /// Drop tokens below min_p x the top probability.
    pub min_p: f32,
    /// Sampling seed (sequence i uses seed + i).
    pub seed: u32,
    /// Keep going past end-of-generation tokens.
    pub ignore_eog: bool,
    /// Stop as soon as the text contains one of these.
    pub stop: Vec<String>,
    /// `None`: no log-probabilities; `Some(n)`, n <= 20: each token's and n alternatives.
    pub n_top_logprobs: Option<i32>,
    /// How drafts are kept when sampling (default [`AcceptMode::Rejection`]:
    /// the target's distribution, more drafts kept; [`AcceptMode::Exact`]:
    /// plain decoding's tokens, seed for seed).
    pub accept: AcceptMode,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            n_predict: 128,
            n_draft: DraftLength::Max,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: 0,
            ignore_eog: false,
            stop: Vec::new(),
            n_top_logprobs: None,
            accept: AcceptMode::Rejection,
        }
    }
}

impl GenerateParams {
    /// Sets `n_predict`.
    #[must_use]
    pub fn with_n_predict(mut self, n: i32) -> Self {
        self.n_predict = n;
        self
    }
    /// Sets the draft length.
    #[must_use]
    pub fn with_n_draft(mut self, n: DraftLength) -> Self {
        self.n_draft = n;
        self
    }
    /// Sets temperature and seed (sampling).
    #[must_use]
    pub fn with_sampling(mut self, temperature: f32, seed: u32) -> Self {
        self.temperature = temperature;
        self.seed = seed;
        self
    }
    /// Adds a stop string.
    #[must_use]
    pub fn with_stop(mut self, stop: &str) -> Self {
        self.stop.push(stop.to_string());
        self
    }
    /// Asks for log-probabilities and `n` alternatives per token.
    #[must_use]
    pub fn with_top_logprobs(mut self, n: i32) -> Self {
        self.n_top_logprobs = Some(n);
        self
    }

    /// Sets how drafts are kept when sampling.
    #[must_use]
    pub fn with_accept(mut self, accept: AcceptMode) -> Self {
        self.accept = accept;
        self
    }

    /// The C struct and the strings it points to (keep both alive for the call).
    pub(crate) fn to_c(&self) -> Result<(sys::specdec_generate_params, Vec<CString>, Vec<*const c_char>), Error> {
        // SAFETY: plain data.
        let mut p = unsafe { sys::specdec_generate_default_params() };
        p.n_predict = self.n_predict;
        p.n_draft = match self.n_draft {
            DraftLength::Max => -1,
            DraftLength::Fixed(n) => n,
            DraftLength::Auto => sys::SPECDEC_N_DRAFT_AUTO,
        };
        p.temperature = self.temperature;
        p.top_k = self.top_k;
        p.top_p = self.top_p;
        p.min_p = self.min_p;
        p.seed = self.seed;
        p.ignore_eog = self.ignore_eog;
        let strings = self
            .stop
            .iter()
            .map(|s| CString::new(s.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| Error::InvalidArgument { message: "a stop string holds a NUL byte".into() })?;
        let ptrs: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        p.stop_strings = if ptrs.is_empty() { std::ptr::null() } else { ptrs.as_ptr() };
        p.n_stop_strings = ptrs.len();
        p.n_top_logprobs = self.n_top_logprobs.unwrap_or(-1);
        p.accept = self.accept.raw();
        Ok((p, strings, ptrs))
    }
}

/// `specdec_stop_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Budget,
    Eog,
    String,
    Context,
    Callback,
    Error,
    Cancelled,
}

impl StopReason {
    pub(crate) fn from_raw(v: sys::specdec_stop_reason) -> StopReason {
        match v {
            sys::SPECDEC_STOP_BUDGET => StopReason::Budget,
            sys::SPECDEC_STOP_EOG => StopReason::Eog,
            sys::SPECDEC_STOP_STRING => StopReason::String,
            sys::SPECDEC_STOP_CONTEXT => StopReason::Context,
            sys::SPECDEC_STOP_CALLBACK => StopReason::Callback,
            sys::SPECDEC_STOP_CANCELLED => StopReason::Cancelled,
            _ => StopReason::Error,
        }
    }
}

/// `specdec_sequence_stats` (verified drafts only). The per-position vectors
/// have one entry per draft position (the session's `n_draft_max`; empty for
/// plain decoding).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SequenceStats {
    pub n_generated: u64,
    pub n_steps: u64,
    /// Proposed tokens verified.
    pub n_drafted: u64,
    /// Proposed tokens the target kept.
    pub n_accepted: u64,
    /// `[i]`: proposals with a token at position `i`.
    pub n_proposed_at: Vec<u64>,
    /// `[i]`: proposals whose token `i` was kept.
    pub n_accepted_at: Vec<u64>,
    /// `[i]`: proposals with a token at position `i` whose tokens before it
    /// were all kept (`[0]`: the non-empty proposals).
    pub n_reached_at: Vec<u64>,
}

impl SequenceStats {
    /// Per draft position `i`: `n_accepted_at[i] / n_reached_at[i]`, the
    /// fraction of drafts kept at `i` given the ones before it were kept
    /// (0 where no proposal reached `i`).
    #[must_use]
    pub fn acceptance_at(&self) -> Vec<f64> {
        self.n_accepted_at
            .iter()
            .zip(&self.n_reached_at)
            .map(|(a, r)| if *r == 0 { 0.0 } else { *a as f64 / *r as f64 })
            .collect()
    }
}

impl SequenceStats {
    pub(crate) fn from_c(s: &sys::specdec_sequence_stats, n_draft_max: i32) -> SequenceStats {
        let n = (n_draft_max.max(0) as usize).min(sys::SPECDEC_MAX_DRAFT);
        SequenceStats {
            n_generated: s.n_generated,
            n_steps: s.n_steps,
            n_drafted: s.n_drafted,
            n_accepted: s.n_accepted,
            n_proposed_at: s.n_proposed_at[..n].to_vec(),
            n_accepted_at: s.n_accepted_at[..n].to_vec(),
            n_reached_at: s.n_reached_at[..n].to_vec(),
        }
    }
}

/// A token and its log-probability under the target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLogprob {
    pub token: LlamaToken,
    pub logprob: f32,
}

/// One sequence's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub tokens: Vec<LlamaToken>,
    /// The text's bytes (not necessarily valid UTF-8: a budget can end inside a character).
    pub text: Vec<u8>,
    pub stop: StopReason,
    pub stats: SequenceStats,
    /// One per token, when asked.
    pub logprobs: Option<Vec<f32>>,
    /// Per token, the n most likely tokens, when asked.
    pub top_logprobs: Option<Vec<Vec<TokenLogprob>>>,
}

impl Completion {
    /// The text, invalid UTF-8 replaced.
    pub fn text_lossy(&self) -> String {
        String::from_utf8_lossy(&self.text).into_owned()
    }
}

/// What a generate call returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub sequences: Vec<Completion>,
    /// Microseconds: prefill, verification, drafting, total.
    pub t_prefill_us: i64,
    pub t_verify_us: i64,
    pub t_draft_us: i64,
    pub t_total_us: i64,
}

/// A failed generate call: the error, and what it produced before failing
/// (each sequence's output so far, stop reason `Error`), when anything ran.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateError {
    pub error: Error,
    pub partial: Option<Generation>,
}

impl fmt::Display for GenerateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for GenerateError {}

impl From<Error> for GenerateError {
    fn from(error: Error) -> Self {
        GenerateError { error, partial: None }
    }
}

impl From<GenerateError> for Error {
    fn from(e: GenerateError) -> Self {
        e.error
    }
}

pub(crate) fn top_logprobs(p: *const sys::specdec_token_logprob, n: usize, n_positions: usize) -> Vec<Vec<TokenLogprob>> {
    if p.is_null() || n_positions == 0 {
        return vec![Vec::new(); n_positions];
    }
    // SAFETY: n entries, valid while the generation or event is.
    let flat = unsafe { std::slice::from_raw_parts(p, n) };
    let k = n / n_positions;
    flat.chunks(k.max(1))
        .take(n_positions)
        .map(|c| c.iter().map(|e| TokenLogprob { token: LlamaToken(e.token), logprob: e.logprob }).collect())
        .collect()
}

fn completion(gen: *const sys::specdec_generation, i: usize, n_draft_max: i32) -> Completion {
    // SAFETY: gen is alive and i < n_sequences; every pointer is copied before it is freed.
    unsafe {
        let mut n = 0usize;
        let t = sys::specdec_generation_tokens(gen, i, &mut n);
        let tokens: Vec<LlamaToken> = if n == 0 { Vec::new() } else { std::slice::from_raw_parts(t, n).iter().map(|t| LlamaToken(*t)).collect() };
        let mut n_text = 0usize;
        let text = sys::specdec_generation_text(gen, i, &mut n_text);
        let text = if n_text == 0 { Vec::new() } else { std::slice::from_raw_parts(text as *const u8, n_text).to_vec() };
        let mut n_lp = 0usize;
        let lp = sys::specdec_generation_logprobs(gen, i, &mut n_lp);
        let logprobs = if lp.is_null() { None } else { Some(std::slice::from_raw_parts(lp, n_lp).to_vec()) };
        let mut n_top = 0usize;
        let top = sys::specdec_generation_top_logprobs(gen, i, &mut n_top);
        let top_logprobs = logprobs.as_ref().map(|_| top_logprobs(top, n_top, tokens.len()));
        Completion {
            stop: StopReason::from_raw(sys::specdec_generation_stop_reason(gen, i)),
            stats: SequenceStats::from_c(&sys::specdec_generation_sequence_stats(gen, i), n_draft_max),
            tokens,
            text,
            logprobs,
            top_logprobs,
        }
    }
}

/// A streaming callback: `(seq_id, token, piece)` for every emitted token;
/// false stops that sequence.
pub type OnPiece<'a> = &'a mut dyn FnMut(i32, LlamaToken, &[u8]) -> bool;
type PieceFn<'a> = OnPiece<'a>;

struct CallbackState<'a> {
    f: PieceFn<'a>,
    panicked: bool,
}

unsafe extern "C" fn on_piece_trampoline(seq_id: i32, token: i32, piece: *const c_char, n_piece: usize, user: *mut c_void) -> bool {
    let state = &mut *(user as *mut CallbackState<'_>);
    if state.panicked {
        return false;
    }
    let bytes = if n_piece == 0 { &[][..] } else { std::slice::from_raw_parts(piece as *const u8, n_piece) };
    // A panic must not unwind into C: it stops the sequence and is reported after the call.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (state.f)(seq_id, LlamaToken(token), bytes))) {
        Ok(go_on) => go_on,
        Err(_) => {
            state.panicked = true;
            false
        }
    }
}

pub(crate) fn run(
    session: *mut sys::specdec_session,
    target: *mut sys::llama_context,
    prompts: &[&[LlamaToken]],
    params: &GenerateParams,
    on_piece: Option<PieceFn<'_>>,
    n_draft_max: i32,
) -> Result<Generation, GenerateError> {
    let (p, _strings, _ptrs) = params.to_c()?;
    let ptrs: Vec<*const sys::llama_token> = prompts.iter().map(|p| p.as_ptr().cast()).collect();
    let sizes: Vec<usize> = prompts.iter().map(|p| p.len()).collect();
    let mut state = on_piece.map(|f| CallbackState { f, panicked: false });
    let (cb, user): (sys::specdec_token_callback, *mut c_void) = match state.as_mut() {
        Some(s) => (Some(on_piece_trampoline), s as *mut CallbackState<'_> as *mut c_void),
        None => (None, std::ptr::null_mut()),
    };
    let mut out = std::ptr::null_mut();
    // SAFETY: every pointer outlives the call; the session and target are
    // exclusively borrowed by the caller for its duration.
    let status = unsafe {
        sys::specdec_generate(session, target, ptrs.as_ptr(), sizes.as_ptr(), prompts.len(), &p, cb, user, &mut out)
    };
    let message = if status != sys::SPECDEC_STATUS_OK { last_error() } else { String::new() };
    let result = if out.is_null() {
        None
    } else {
        // SAFETY: out is a generation we own and free here.
        unsafe {
            let times = sys::specdec_generation_get_times(out);
            let n = sys::specdec_generation_n_sequences(out);
            let g = Generation {
                sequences: (0..n).map(|i| completion(out, i, n_draft_max)).collect(),
                t_prefill_us: times.t_prefill_us,
                t_verify_us: times.t_verify_us,
                t_draft_us: times.t_draft_us,
                t_total_us: times.t_total_us,
            };
            sys::specdec_generation_free(out);
            Some(g)
        }
    };
    if status != sys::SPECDEC_STATUS_OK {
        return Err(GenerateError { error: Error::from_status(status, message), partial: result });
    }
    if state.map_or(false, |s| s.panicked) {
        panic!("the on_piece callback panicked");
    }
    result.ok_or_else(|| GenerateError::from(Error::NativeFailure { message: "no generation".into() }))
}

/// Plain decoding of `target` alone: the reference every strategy's greedy output equals.
pub fn generate_plain(
    target: &mut LlamaContext<'_>,
    prompts: &[&[LlamaToken]],
    params: &GenerateParams,
    on_piece: Option<OnPiece<'_>>,
) -> Result<Generation, GenerateError> {
    run(std::ptr::null_mut(), target.as_ptr(), prompts, params, on_piece, 0)
}
