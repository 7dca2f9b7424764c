//! The llama.cpp objects a session borrows: models, contexts, batches.
//! Only what `llama.h` and `specdec.h` offer.
//!
//! Lifetimes: a [`LlamaContext<'model>`] borrows its [`LlamaModel`]; a draft
//! context made by [`LlamaContext::new_draft_context`] points at its target
//! (llama.cpp's `ctx_other`), so it keeps the target's native context alive
//! (reference-counted) until it is dropped itself, whatever order the Rust
//! values are dropped in.

use std::os::raw::c_char;
use std::path::Path;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::Once;

use crate::error::{check, Error, Result};
use crate::inspect::{inspect, path_cstring, Strategy};
use crate::sys;

/// A token id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct LlamaToken(pub i32);

/// Proof that llama.cpp's backends are initialised (`llama_backend_init`,
/// once per process). llama.cpp's log is silenced; see [`LlamaBackend::init_with_log`].
#[derive(Debug, Clone, Copy)]
pub struct LlamaBackend {
    _private: (),
}

static INIT: Once = Once::new();

unsafe extern "C" fn quiet_log(_level: sys::ggml_log_level, _text: *const c_char, _user: *mut std::os::raw::c_void) {}

impl LlamaBackend {
    /// Initialises llama.cpp once (later calls return at once) with its log silenced.
    pub fn init() -> LlamaBackend {
        // SAFETY: called once; the callback is a plain function with static lifetime.
        INIT.call_once(|| unsafe {
            sys::llama_log_set(Some(quiet_log), std::ptr::null_mut());
            sys::llama_backend_init();
        });
        LlamaBackend { _private: () }
    }

    /// As [`LlamaBackend::init`], keeping llama.cpp's own log (stderr).
    pub fn init_with_log() -> LlamaBackend {
        // SAFETY: as above.
        INIT.call_once(|| unsafe { sys::llama_backend_init() });
        LlamaBackend { _private: () }
    }
}

/// Parameters of [`LlamaModel::load_from_file`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LlamaModelParams {
    /// Load the NextN (MTP) heads, which the MTP strategy drafts with
    /// (llama.cpp skips them by default).
    pub load_mtp: bool,
    /// Layers to offload to a GPU; `None`: llama.cpp's default.
    pub n_gpu_layers: Option<i32>,
}

impl LlamaModelParams {
    /// Sets [`LlamaModelParams::load_mtp`].
    #[must_use]
    pub fn with_load_mtp(mut self, load_mtp: bool) -> Self {
        self.load_mtp = load_mtp;
        self
    }
}

/// A loaded model. Not `Clone`; contexts borrow it.
#[derive(Debug)]
pub struct LlamaModel {
    raw: NonNull<sys::llama_model>,
    load_mtp: bool,
}

impl LlamaModel {
    /// Loads a GGUF file. The file is inspected first (`specdec_inspect`), so
    /// a malformed file is an error here rather than an abort inside
    /// llama.cpp's loader.
    pub fn load_from_file(_backend: &LlamaBackend, path: impl AsRef<Path>, params: &LlamaModelParams) -> Result<LlamaModel> {
        let path = path.as_ref();
        inspect(path)?;
        let c_path = path_cstring(path)?;
        // SAFETY: default params are plain data; the path outlives the call.
        let raw = unsafe {
            let mut p = sys::llama_model_default_params();
            p.load_mtp = params.load_mtp;
            if let Some(n) = params.n_gpu_layers {
                p.n_gpu_layers = n;
            }
            sys::llama_model_load_from_file(c_path.as_ptr(), p)
        };
        let raw = NonNull::new(raw).ok_or_else(|| Error::Io {
            message: format!("llama.cpp could not load '{}'", path.display()),
        })?;
        Ok(LlamaModel { raw, load_mtp: params.load_mtp })
    }

    /// A context over this model (`llama_init_from_model`). An MTP context
    /// needs a model loaded with `load_mtp` (llama.cpp would abort);
    /// [`LlamaContext::new_draft_context`] makes draft contexts with every check.
    pub fn new_context(&self, _backend: &LlamaBackend, params: LlamaContextParams) -> Result<LlamaContext<'_>> {
        if params.ctx_type == LlamaContextType::Mtp && !self.load_mtp {
            return Err(Error::ModelUnsupported {
                message: "an MTP context needs the model's NextN heads: load it with load_mtp".into(),
            });
        }
        let p = params.to_c();
        // SAFETY: the model is alive for the borrow; the params are plain data.
        let raw = unsafe { sys::llama_init_from_model(self.raw.as_ptr(), p) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::NativeFailure {
            message: "llama.cpp could not create the context".into(),
        })?;
        Ok(LlamaContext { inner: Rc::new(RawContext(raw)), model: self, ctx_type: params.ctx_type, _target: None })
    }

    /// Tokens in the vocabulary.
    pub fn n_vocab(&self) -> i32 {
        // SAFETY: the model is alive; the vocabulary lives as long as it.
        unsafe { sys::llama_vocab_n_tokens(self.vocab()) }
    }

    /// Hidden width.
    pub fn n_embd(&self) -> i32 {
        // SAFETY: the model is alive.
        unsafe { sys::llama_model_n_embd(self.raw.as_ptr()) }
    }

    /// Recurrent or hybrid memory (rejected drafts roll back through `n_rs_seq` snapshots).
    pub fn is_recurrent(&self) -> bool {
        // SAFETY: the model is alive.
        unsafe { sys::llama_model_is_recurrent(self.raw.as_ptr()) || sys::llama_model_is_hybrid(self.raw.as_ptr()) }
    }

    /// Whether `token` ends a generation.
    pub fn is_eog(&self, token: LlamaToken) -> bool {
        // SAFETY: the model is alive.
        unsafe { sys::llama_vocab_is_eog(self.vocab(), token.0) }
    }

    /// Token ids of `text` (`specdec_tokenize`), with the BOS/EOS the model
    /// adds when `add_special`. [`Error::UnrepresentableText`] for a character
    /// the vocabulary has no token for (the message names it).
    pub fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<LlamaToken>> {
        self.tokenize_bytes(text.as_bytes(), add_special, false)
    }

    /// As [`LlamaModel::tokenize`], for any bytes; `parse_special`: special
    /// tokens spelled in the text (`"<s>"`) become those tokens.
    pub fn tokenize_bytes(&self, text: &[u8], add_special: bool, parse_special: bool) -> Result<Vec<LlamaToken>> {
        let tokens = read_sized(text.len() + 2, |dst, cap, n| {
            // SAFETY: the text and the buffer (cap tokens) outlive the call.
            unsafe {
                sys::specdec_tokenize(self.vocab(), text.as_ptr().cast(), text.len(), add_special, parse_special, dst, cap, n)
            }
        })?;
        Ok(tokens.into_iter().map(LlamaToken).collect())
    }

    /// The text of `tokens` (`specdec_detokenize`): their pieces, less the
    /// leading space the tokenizer adds, so it is the tokenized text again.
    /// `remove_special`: drop a leading BOS and trailing EOS the model adds;
    /// `unparse_special`: write special tokens' text. Bytes, not necessarily
    /// UTF-8. [`Error::InvalidArgument`] for a token outside the vocabulary.
    pub fn detokenize(&self, tokens: &[LlamaToken], remove_special: bool, unparse_special: bool) -> Result<Vec<u8>> {
        read_sized(8 * tokens.len() + 16, |dst: *mut u8, cap, n| {
            // SAFETY: LlamaToken is a transparent i32; the tokens and the buffer outlive the call.
            unsafe {
                sys::specdec_detokenize(
                    self.vocab(),
                    tokens.as_ptr().cast(),
                    tokens.len(),
                    remove_special,
                    unparse_special,
                    dst.cast(),
                    cap,
                    n,
                )
            }
        })
    }

    /// The bytes of one token, a special token's text included
    /// (`specdec_token_to_piece`). [`Error::InvalidArgument`] for a token
    /// outside the vocabulary.
    pub fn token_to_piece(&self, token: LlamaToken) -> Result<Vec<u8>> {
        read_sized(16, |dst: *mut u8, cap, n| {
            // SAFETY: the buffer (cap bytes) outlives the call.
            unsafe { sys::specdec_token_to_piece(self.vocab(), token.0, 0, true, dst.cast(), cap, n) }
        })
    }

    fn vocab(&self) -> *const sys::llama_vocab {
        // SAFETY: the model is alive; the vocabulary lives as long as it.
        unsafe { sys::llama_model_get_vocab(self.raw.as_ptr()) }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::llama_model {
        self.raw.as_ptr()
    }
}

impl Drop for LlamaModel {
    fn drop(&mut self) {
        // SAFETY: every context borrows the model, so none is alive.
        unsafe { sys::llama_model_free(self.raw.as_ptr()) }
    }
}

/// Calls a specdec function that fills the caller's buffer (`dst`,
/// capacity, `&mut n`): first with `guess` elements, then once more with
/// the size it reported when that was too small (`BUFFER_TOO_SMALL`).
fn read_sized<T: Copy + Default>(
    guess: usize,
    mut call: impl FnMut(*mut T, usize, *mut usize) -> sys::specdec_status,
) -> Result<Vec<T>> {
    let mut buf = vec![T::default(); guess.max(1)];
    let mut n = 0usize;
    let mut status = call(buf.as_mut_ptr(), buf.len(), &mut n);
    if status == sys::SPECDEC_STATUS_BUFFER_TOO_SMALL {
        buf.resize(n, T::default());
        status = call(buf.as_mut_ptr(), buf.len(), &mut n);
    }
    check(status)?;
    buf.truncate(n);
    Ok(buf)
}

/// `llama_context_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlamaContextType {
    /// An ordinary context.
    Default,
    /// A context that runs a model's NextN (MTP) heads.
    Mtp,
}

/// Parameters of a context; builder methods as in the seeds.
#[derive(Debug, Clone, Copy)]
pub struct LlamaContextParams {
    /// Positions in all (0: the model's training length), shared by the sequences.
    pub n_ctx: u32,
    /// Largest batch `llama_decode` takes.
    pub n_batch: u32,
    /// Physical batch; 0: `n_batch`.
    pub n_ubatch: u32,
    /// Sequences.
    pub n_seq_max: u32,
    /// Recurrent-state snapshots per sequence (speculation on a recurrent or hybrid target needs `n_draft_max`).
    pub n_rs_seq: u32,
    /// Threads; 0: every available CPU.
    pub n_threads: i32,
    /// The context's type.
    pub ctx_type: LlamaContextType,
    /// One KV buffer for all sequences.
    pub kv_unified: bool,
}

impl Default for LlamaContextParams {
    fn default() -> Self {
        LlamaContextParams {
            n_ctx: 4096,
            n_batch: 512,
            n_ubatch: 0,
            n_seq_max: 1,
            n_rs_seq: 0,
            n_threads: 0,
            ctx_type: LlamaContextType::Default,
            kv_unified: false,
        }
    }
}

impl LlamaContextParams {
    /// Sets `n_ctx`.
    #[must_use]
    pub fn with_n_ctx(mut self, n: u32) -> Self {
        self.n_ctx = n;
        self
    }
    /// Sets `n_batch`.
    #[must_use]
    pub fn with_n_batch(mut self, n: u32) -> Self {
        self.n_batch = n;
        self
    }
    /// Sets `n_seq_max`.
    #[must_use]
    pub fn with_n_seq_max(mut self, n: u32) -> Self {
        self.n_seq_max = n;
        self
    }
    /// Sets `n_rs_seq`.
    #[must_use]
    pub fn with_n_rs_seq(mut self, n: u32) -> Self {
        self.n_rs_seq = n;
        self
    }
    /// Sets the thread count (0: all).
    #[must_use]
    pub fn with_n_threads(mut self, n: i32) -> Self {
        self.n_threads = n;
        self
    }
    /// Sets the context type.
    #[must_use]
    pub fn with_ctx_type(mut self, t: LlamaContextType) -> Self {
        self.ctx_type = t;
        self
    }

    fn to_c(self) -> sys::llama_context_params {
        // SAFETY: plain data.
        let mut p = unsafe { sys::llama_context_default_params() };
        p.n_ctx = self.n_ctx;
        p.n_batch = self.n_batch;
        p.n_ubatch = if self.n_ubatch == 0 { self.n_batch } else { self.n_ubatch };
        p.n_seq_max = self.n_seq_max;
        p.n_rs_seq = self.n_rs_seq;
        let threads = if self.n_threads > 0 {
            self.n_threads
        } else {
            std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(1)
        };
        p.n_threads = threads;
        p.n_threads_batch = threads;
        p.ctx_type = match self.ctx_type {
            LlamaContextType::Default => sys::LLAMA_CONTEXT_TYPE_DEFAULT,
            LlamaContextType::Mtp => sys::LLAMA_CONTEXT_TYPE_MTP,
        };
        p.kv_unified = self.kv_unified;
        p
    }
}

pub(crate) struct RawContext(NonNull<sys::llama_context>);

impl Drop for RawContext {
    fn drop(&mut self) {
        // SAFETY: the last owner; a draft context that points at this one holds
        // an owner too, so it has been freed already.
        unsafe { sys::llama_free(self.0.as_ptr()) }
    }
}

/// A llama.cpp context over a model. Neither `Send` nor `Sync` (llama.cpp
/// contexts are single-threaded, and draft contexts share their target).
pub struct LlamaContext<'model> {
    inner: Rc<RawContext>,
    model: &'model LlamaModel,
    ctx_type: LlamaContextType,
    // Declared after `inner`, so dropped after it: a draft context is freed
    // before the target it points at.
    _target: Option<Rc<RawContext>>,
}

impl<'model> LlamaContext<'model> {
    /// The draft context `strategy` needs over this target
    /// (`specdec_draft_context_init`, which checks the models first where
    /// llama.cpp would abort): an MTP context over this context's model
    /// (`draft_model` `None`; the model must be loaded with `load_mtp`), or a
    /// context over `draft_model`. `params` gives threads and such; sizes are
    /// raised to what the strategy and `n_seq` / `n_draft_max` need.
    pub fn new_draft_context<'a>(
        &self,
        draft_model: Option<&'a LlamaModel>,
        strategy: Strategy,
        n_seq: u32,
        n_draft_max: i32,
        params: LlamaContextParams,
    ) -> Result<LlamaContext<'a>>
    where
        'model: 'a,
    {
        // SAFETY: plain data.
        let mut sp = unsafe { sys::specdec_session_default_params() };
        sp.strategy = strategy as sys::specdec_strategy;
        sp.n_seq = n_seq;
        sp.n_draft_max = n_draft_max;
        let mut out: *mut sys::llama_context = std::ptr::null_mut();
        // SAFETY: the target and the model are alive; out receives an owned context.
        check(unsafe {
            sys::specdec_draft_context_init(
                self.as_ptr(),
                draft_model.map_or(std::ptr::null_mut(), |m| m.as_ptr()),
                &sp,
                params.to_c(),
                &mut out,
            )
        })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::NativeFailure { message: "no draft context".into() })?;
        let model: &'a LlamaModel = draft_model.unwrap_or(self.model);
        Ok(LlamaContext {
            inner: Rc::new(RawContext(raw)),
            model,
            ctx_type: if strategy == Strategy::Mtp { LlamaContextType::Mtp } else { LlamaContextType::Default },
            _target: Some(self.inner.clone()),
        })
    }

    /// The model.
    pub fn model(&self) -> &'model LlamaModel {
        self.model
    }

    /// The type it was created with.
    pub fn context_type(&self) -> LlamaContextType {
        self.ctx_type
    }

    /// Positions in all.
    pub fn n_ctx(&self) -> u32 {
        // SAFETY: alive.
        unsafe { sys::llama_n_ctx(self.as_ptr()) }
    }

    /// Sequences.
    pub fn n_seq_max(&self) -> u32 {
        // SAFETY: alive.
        unsafe { sys::llama_n_seq_max(self.as_ptr()) }
    }

    /// Logical batch size.
    pub fn n_batch(&self) -> u32 {
        // SAFETY: alive.
        unsafe { sys::llama_n_batch(self.as_ptr()) }
    }

    /// Physical batch size.
    pub fn n_ubatch(&self) -> u32 {
        // SAFETY: alive.
        unsafe { sys::llama_n_ubatch(self.as_ptr()) }
    }

    /// Recurrent-state snapshots per sequence.
    pub fn n_rs_seq(&self) -> u32 {
        // SAFETY: alive.
        unsafe { sys::llama_n_rs_seq(self.as_ptr()) }
    }

    /// `llama_decode`. 1 (no room) is [`Error::ContextFull`], the rest [`Error::Decode`].
    pub fn decode(&mut self, batch: &mut LlamaBatch) -> Result<()> {
        // SAFETY: the batch's arrays hold n_tokens valid entries (LlamaBatch keeps them so).
        let rc = unsafe { sys::llama_decode(self.as_ptr(), batch.raw) };
        match rc {
            0 => Ok(()),
            1 => Err(Error::ContextFull { message: "llama_decode found no room for the batch".into() }),
            rc => Err(Error::Decode { message: format!("llama_decode returned {}", rc) }),
        }
    }

    /// The logits of output row `i` of the last decode (negative: from the end),
    /// `None` when that row has none.
    pub fn logits_ith(&self, i: i32) -> Option<&[f32]> {
        let n = self.model.n_vocab() as usize;
        // SAFETY: llama.cpp returns NULL (and logs) for a row without logits;
        // the slice is valid until the next decode, which needs &mut self.
        unsafe {
            let p = sys::llama_get_logits_ith(self.as_ptr(), i);
            if p.is_null() {
                None
            } else {
                Some(std::slice::from_raw_parts(p, n))
            }
        }
    }

    /// Removes positions `[p0, p1)` of a sequence (`None`: every sequence; `p0`
    /// `None`: from 0; `p1` `None`: to the end) from the memory
    /// (`llama_memory_seq_rm`). `Ok(false)` when the memory cannot drop a
    /// partial range; an error when a value exceeds `i32`.
    pub fn clear_kv_cache_seq(&mut self, seq_id: Option<u32>, p0: Option<u32>, p1: Option<u32>) -> Result<bool> {
        let seq = to_i32(seq_id, "seq_id")?;
        let (p0, p1) = (to_i32(p0, "p0")?, to_i32(p1, "p1")?);
        // SAFETY: alive; the memory belongs to the context.
        Ok(unsafe { sys::llama_memory_seq_rm(sys::llama_get_memory(self.as_ptr()), seq, p0, p1) })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::llama_context {
        self.inner.0.as_ptr()
    }
}

pub(crate) fn to_i32(v: Option<u32>, what: &str) -> Result<i32> {
    match v {
        None => Ok(-1),
        Some(v) => i32::try_from(v).map_err(|_| Error::InvalidArgument { message: format!("{} {} exceeds i32", what, v) }),
    }
}

impl std::fmt::Debug for LlamaContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaContext").field("ctx_type", &self.ctx_type).field("n_ctx", &self.n_ctx()).finish()
    }
}

/// A batch of tokens for `llama_decode` (`llama_batch_init` / `llama_batch_free`).
/// [`LlamaBatch::add`] checks capacity, so the arrays never overflow.
pub struct LlamaBatch {
    pub(crate) raw: sys::llama_batch,
    capacity: i32,
    n_seq_max: i32,
}

impl LlamaBatch {
    /// Room for `n_tokens` tokens of at most `n_seq_max` sequences each.
    pub fn new(n_tokens: usize, n_seq_max: i32) -> LlamaBatch {
        let n = i32::try_from(n_tokens.max(1)).expect("batch size fits i32");
        let n_seq_max = n_seq_max.max(1);
        // SAFETY: allocates arrays of n entries.
        let raw = unsafe { sys::llama_batch_init(n, 0, n_seq_max) };
        LlamaBatch { raw, capacity: n, n_seq_max }
    }

    /// Appends a token at `pos` for `seq_ids`; `logits`: output its row.
    pub fn add(&mut self, token: LlamaToken, pos: i32, seq_ids: &[i32], logits: bool) -> Result<()> {
        let i = self.raw.n_tokens;
        if i >= self.capacity || seq_ids.is_empty() || seq_ids.len() > self.n_seq_max as usize {
            return Err(Error::InvalidArgument {
                message: format!("batch of {} tokens is full, or {} sequence ids (1..={})", self.capacity, seq_ids.len(), self.n_seq_max),
            });
        }
        // SAFETY: i < capacity, and seq_id[i] holds n_seq_max entries.
        unsafe {
            let i = i as usize;
            *self.raw.token.add(i) = token.0;
            *self.raw.pos.add(i) = pos;
            *self.raw.n_seq_id.add(i) = seq_ids.len() as i32;
            let ids = *self.raw.seq_id.add(i);
            for (k, s) in seq_ids.iter().enumerate() {
                *ids.add(k) = *s;
            }
            *self.raw.logits.add(i) = i8::from(logits);
        }
        self.raw.n_tokens += 1;
        Ok(())
    }

    /// Empties the batch.
    pub fn clear(&mut self) {
        self.raw.n_tokens = 0;
    }

    /// Tokens in it.
    pub fn n_tokens(&self) -> i32 {
        self.raw.n_tokens
    }
}

impl Drop for LlamaBatch {
    fn drop(&mut self) {
        // SAFETY: allocated by llama_batch_init.
        unsafe { sys::llama_batch_free(self.raw) }
    }
}
