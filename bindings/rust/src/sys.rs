//! Raw declarations of `specdec.h` (all of it) and of the `llama.h` subset
//! the crate calls. One Rust item per C item, same names, same field order;
//! `tests/header.rs` parses both headers and this file and fails when they
//! disagree, so a header change that is not mirrored here fails the tests.
#![allow(non_camel_case_types, missing_docs)]

use std::os::raw::{c_char, c_int, c_void};

// --- llama.h types ------------------------------------------------------------------
pub type llama_token = i32;
pub type llama_pos = i32;
pub type llama_seq_id = i32;
pub type llama_state_seq_flags = u32;
pub type llama_memory_t = *mut c_void;
pub type ggml_backend_dev_t = *mut c_void;
pub type ggml_log_level = c_int;
pub type ggml_type = c_int;
pub type llama_split_mode = c_int;
pub type llama_load_mode = c_int;
pub type llama_lazy_mode = c_int;
pub type llama_context_type = c_int;
pub type llama_rope_scaling_type = c_int;
pub type llama_pooling_type = c_int;
pub type llama_attention_type = c_int;
pub type llama_flash_attn_type = c_int;

pub const LLAMA_TOKEN_NULL: llama_token = -1;
pub const LLAMA_CONTEXT_TYPE_DEFAULT: llama_context_type = 0;
pub const LLAMA_CONTEXT_TYPE_MTP: llama_context_type = 1;

#[repr(C)]
pub struct llama_model {
    _private: [u8; 0],
}
#[repr(C)]
pub struct llama_context {
    _private: [u8; 0],
}
#[repr(C)]
pub struct llama_vocab {
    _private: [u8; 0],
}
#[repr(C)]
pub struct llama_model_tensor_buft_override {
    _private: [u8; 0],
}
#[repr(C)]
pub struct llama_model_kv_override {
    _private: [u8; 0],
}
#[repr(C)]
pub struct llama_sampler_seq_config {
    _private: [u8; 0],
}

pub type llama_progress_callback = Option<unsafe extern "C" fn(progress: f32, user_data: *mut c_void) -> bool>;
pub type ggml_backend_sched_eval_callback = Option<unsafe extern "C" fn(t: *mut c_void, ask: bool, user_data: *mut c_void) -> bool>;
pub type ggml_abort_callback = Option<unsafe extern "C" fn(data: *mut c_void) -> bool>;
pub type ggml_log_callback = Option<unsafe extern "C" fn(level: ggml_log_level, text: *const c_char, user_data: *mut c_void)>;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_batch {
    pub n_tokens: i32,
    pub token: *mut llama_token,
    pub embd: *mut f32,
    pub pos: *mut llama_pos,
    pub n_seq_id: *mut i32,
    pub seq_id: *mut *mut llama_seq_id,
    pub logits: *mut i8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_model_params {
    pub devices: *mut ggml_backend_dev_t,
    pub tensor_buft_overrides: *const llama_model_tensor_buft_override,
    pub n_gpu_layers: i32,
    pub split_mode: llama_split_mode,
    pub load_mode: llama_load_mode,
    pub lazy_mode: llama_lazy_mode,
    pub main_gpu: i32,
    pub tensor_split: *const f32,
    pub progress_callback: llama_progress_callback,
    pub progress_callback_user_data: *mut c_void,
    pub kv_overrides: *const llama_model_kv_override,
    pub vocab_only: bool,
    pub check_tensors: bool,
    pub use_extra_bufts: bool,
    pub no_host: bool,
    pub no_alloc: bool,
    pub load_mtp: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_context_params {
    pub n_ctx: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    pub n_rs_seq: u32,
    pub n_outputs_max: u32,
    pub n_outputs_max_per_seq: u32,
    pub n_threads: i32,
    pub n_threads_batch: i32,
    pub ctx_type: llama_context_type,
    pub rope_scaling_type: llama_rope_scaling_type,
    pub pooling_type: llama_pooling_type,
    pub attention_type: llama_attention_type,
    pub flash_attn_type: llama_flash_attn_type,
    pub rope_freq_base: f32,
    pub rope_freq_scale: f32,
    pub yarn_ext_factor: f32,
    pub yarn_attn_factor: f32,
    pub yarn_beta_fast: f32,
    pub yarn_beta_slow: f32,
    pub yarn_orig_ctx: u32,
    pub defrag_thold: f32,
    pub cb_eval: ggml_backend_sched_eval_callback,
    pub cb_eval_user_data: *mut c_void,
    pub type_k: ggml_type,
    pub type_v: ggml_type,
    pub abort_callback: ggml_abort_callback,
    pub abort_callback_data: *mut c_void,
    pub embeddings: bool,
    pub offload_kqv: bool,
    pub no_perf: bool,
    pub op_offload: bool,
    pub swa_full: bool,
    pub kv_unified: bool,
    pub samplers: *mut llama_sampler_seq_config,
    pub n_samplers: usize,
    pub ctx_other: *mut llama_context,
}

extern "C" {
    pub fn llama_backend_init();
    pub fn llama_log_set(log_callback: ggml_log_callback, user_data: *mut c_void);
    pub fn llama_model_default_params() -> llama_model_params;
    pub fn llama_context_default_params() -> llama_context_params;
    pub fn llama_model_load_from_file(path_model: *const c_char, params: llama_model_params) -> *mut llama_model;
    pub fn llama_model_free(model: *mut llama_model);
    pub fn llama_init_from_model(model: *mut llama_model, params: llama_context_params) -> *mut llama_context;
    pub fn llama_free(ctx: *mut llama_context);
    pub fn llama_n_ctx(ctx: *const llama_context) -> u32;
    pub fn llama_n_batch(ctx: *const llama_context) -> u32;
    pub fn llama_n_ubatch(ctx: *const llama_context) -> u32;
    pub fn llama_n_seq_max(ctx: *const llama_context) -> u32;
    pub fn llama_n_rs_seq(ctx: *const llama_context) -> u32;
    pub fn llama_get_memory(ctx: *const llama_context) -> llama_memory_t;
    pub fn llama_model_get_vocab(model: *const llama_model) -> *const llama_vocab;
    pub fn llama_model_n_embd(model: *const llama_model) -> i32;
    pub fn llama_model_is_recurrent(model: *const llama_model) -> bool;
    pub fn llama_model_is_hybrid(model: *const llama_model) -> bool;
    pub fn llama_vocab_n_tokens(vocab: *const llama_vocab) -> i32;
    pub fn llama_vocab_is_eog(vocab: *const llama_vocab, token: llama_token) -> bool;
    pub fn llama_memory_seq_rm(mem: llama_memory_t, seq_id: llama_seq_id, p0: llama_pos, p1: llama_pos) -> bool;
    pub fn llama_batch_init(n_tokens: i32, embd: i32, n_seq_max: i32) -> llama_batch;
    pub fn llama_batch_free(batch: llama_batch);
    pub fn llama_decode(ctx: *mut llama_context, batch: llama_batch) -> i32;
    pub fn llama_get_logits_ith(ctx: *mut llama_context, i: i32) -> *mut f32;
}

// --- specdec.h ------------------------------------------------------------------------
pub const SPECDEC_VERSION_MAJOR: u32 = 0;
pub const SPECDEC_VERSION_MINOR: u32 = 5;
pub const SPECDEC_VERSION_PATCH: u32 = 0;
pub const SPECDEC_VERSION: &str = "0.5.0";
pub const SPECDEC_MAX_SEQ: usize = 256;
pub const SPECDEC_MAX_DRAFT: usize = 128;
pub const SPECDEC_MAX_PROMPT_TOKENS: usize = 16777216;
pub const SPECDEC_MAX_STATE_BYTES: usize = 67108864;
pub const SPECDEC_MAX_GRAMMAR_BYTES: usize = 131072;
pub const SPECDEC_MAX_GRAMMAR_NESTING: usize = 128;
pub const SPECDEC_MAX_GRAMMAR_RULES: usize = 4096;
pub const SPECDEC_N_DRAFT_AUTO: i32 = -2;
pub const SPECDEC_DRAFT_VOCAB_AUTO: i32 = -1;
pub const SPECDEC_DRAFT_VOCAB_DEFAULT: i32 = 32768;
pub const SPECDEC_DRAFT_VOCAB_AUTO_MIN: i32 = 65536;
pub const SPECDEC_MIN_SAMPLING_TEMPERATURE: f32 = 1e-4;
pub const SPECDEC_MAX_TOP_LOGPROBS: usize = 20;
pub const SPECDEC_MAX_TARGET_LAYERS: usize = 16;

pub type specdec_status = c_int;
pub const SPECDEC_STATUS_OK: specdec_status = 0;
pub const SPECDEC_STATUS_INVALID_ARGUMENT: specdec_status = 100;
pub const SPECDEC_STATUS_INVALID_CONFIG: specdec_status = 101;
pub const SPECDEC_STATUS_UNREPRESENTABLE_TEXT: specdec_status = 102;
pub const SPECDEC_STATUS_BUFFER_TOO_SMALL: specdec_status = 103;
pub const SPECDEC_STATUS_BAD_SEQ_ID: specdec_status = 200;
pub const SPECDEC_STATUS_PROPOSAL_PENDING: specdec_status = 201;
pub const SPECDEC_STATUS_NO_PROPOSAL: specdec_status = 202;
pub const SPECDEC_STATUS_ACCEPTED_TOO_MANY: specdec_status = 203;
pub const SPECDEC_STATUS_PROMPT_TOO_LONG: specdec_status = 204;
pub const SPECDEC_STATUS_POSITION_MISMATCH: specdec_status = 205;
pub const SPECDEC_STATUS_CONTEXT_FULL: specdec_status = 206;
pub const SPECDEC_STATUS_QUEUE_FULL: specdec_status = 207;
pub const SPECDEC_STATUS_UNKNOWN_REQUEST: specdec_status = 208;
pub const SPECDEC_STATUS_WRONG_CONTEXT_TYPE: specdec_status = 300;
pub const SPECDEC_STATUS_SEQ_CAPACITY: specdec_status = 301;
pub const SPECDEC_STATUS_BATCH_CAPACITY: specdec_status = 302;
pub const SPECDEC_STATUS_RECURRENT_SLOTS: specdec_status = 303;
pub const SPECDEC_STATUS_WIDTH_MISMATCH: specdec_status = 304;
pub const SPECDEC_STATUS_LAYER_MISMATCH: specdec_status = 305;
pub const SPECDEC_STATUS_VOCAB_MISMATCH: specdec_status = 306;
pub const SPECDEC_STATUS_MODEL_UNSUPPORTED: specdec_status = 307;
pub const SPECDEC_STATUS_UNAVAILABLE: specdec_status = 308;
pub const SPECDEC_STATUS_STATE_MALFORMED: specdec_status = 400;
pub const SPECDEC_STATUS_STATE_TOO_LARGE: specdec_status = 401;
pub const SPECDEC_STATUS_STATE_VERSION: specdec_status = 402;
pub const SPECDEC_STATUS_STATE_STRATEGY: specdec_status = 403;
pub const SPECDEC_STATUS_STATE_CONFIG: specdec_status = 404;
pub const SPECDEC_STATUS_STATE_SEQUENCE: specdec_status = 405;
pub const SPECDEC_STATUS_DECODE_FAILED: specdec_status = 500;
pub const SPECDEC_STATUS_NATIVE_FAILURE: specdec_status = 501;
pub const SPECDEC_STATUS_IO_ERROR: specdec_status = 502;
pub const SPECDEC_STATUS_OUT_OF_MEMORY: specdec_status = 503;
pub const SPECDEC_STATUS_MALFORMED_FILE: specdec_status = 504;
pub const SPECDEC_STATUS_MAX_ENUM: specdec_status = 0x7FFFFFFF;

pub type specdec_status_kind = c_int;
pub const SPECDEC_STATUS_KIND_NONE: specdec_status_kind = 0;
pub const SPECDEC_STATUS_KIND_CONFIGURATION: specdec_status_kind = 1;
pub const SPECDEC_STATUS_KIND_LIFECYCLE: specdec_status_kind = 2;
pub const SPECDEC_STATUS_KIND_COMPATIBILITY: specdec_status_kind = 3;
pub const SPECDEC_STATUS_KIND_STATE: specdec_status_kind = 4;
pub const SPECDEC_STATUS_KIND_NATIVE: specdec_status_kind = 5;

pub type specdec_strategy = c_int;
pub const SPECDEC_STRATEGY_MTP: specdec_strategy = 0;
pub const SPECDEC_STRATEGY_EAGLE3: specdec_strategy = 1;
pub const SPECDEC_STRATEGY_DFLASH: specdec_strategy = 2;
pub const SPECDEC_STRATEGY_DSPARK: specdec_strategy = 3;
pub const SPECDEC_STRATEGY_DRAFT: specdec_strategy = 4;
pub const SPECDEC_STRATEGY_NGRAM_SIMPLE: specdec_strategy = 5;
pub const SPECDEC_STRATEGY_NGRAM_MAP_K: specdec_strategy = 6;
pub const SPECDEC_STRATEGY_NGRAM_MAP_K4V: specdec_strategy = 7;
pub const SPECDEC_STRATEGY_NGRAM_MOD: specdec_strategy = 8;
pub const SPECDEC_STRATEGY_NGRAM_CACHE: specdec_strategy = 9;
pub const SPECDEC_STRATEGY_COUNT: specdec_strategy = 10;
pub const SPECDEC_STRATEGY_MAX_ENUM: specdec_strategy = 0x7FFFFFFF;

pub type specdec_context_role = c_int;
pub const SPECDEC_CONTEXT_TARGET: specdec_context_role = 0;
pub const SPECDEC_CONTEXT_DRAFT: specdec_context_role = 1;
pub const SPECDEC_CONTEXT_MAX_ENUM: specdec_context_role = 0x7FFFFFFF;

pub type specdec_stop_reason = c_int;
pub const SPECDEC_STOP_INVALID: specdec_stop_reason = -1;
pub const SPECDEC_STOP_BUDGET: specdec_stop_reason = 0;
pub const SPECDEC_STOP_EOG: specdec_stop_reason = 1;
pub const SPECDEC_STOP_STRING: specdec_stop_reason = 2;
pub const SPECDEC_STOP_CONTEXT: specdec_stop_reason = 3;
pub const SPECDEC_STOP_CALLBACK: specdec_stop_reason = 4;
pub const SPECDEC_STOP_ERROR: specdec_stop_reason = 5;
pub const SPECDEC_STOP_CANCELLED: specdec_stop_reason = 6;
pub const SPECDEC_STOP_MAX_ENUM: specdec_stop_reason = 0x7FFFFFFF;

pub type specdec_engine_event_type = c_int;
pub const SPECDEC_ENGINE_EVENT_TOKEN: specdec_engine_event_type = 0;
pub const SPECDEC_ENGINE_EVENT_FINISHED: specdec_engine_event_type = 1;
pub const SPECDEC_ENGINE_EVENT_MAX_ENUM: specdec_engine_event_type = 0x7FFFFFFF;

pub type specdec_accept_mode = c_int;
pub const SPECDEC_ACCEPT_EXACT: specdec_accept_mode = 0;
pub const SPECDEC_ACCEPT_REJECTION: specdec_accept_mode = 1;
pub const SPECDEC_ACCEPT_MAX_ENUM: specdec_accept_mode = 0x7FFFFFFF;

pub type specdec_request_id = u64;

#[repr(C)]
pub struct specdec_session {
    _private: [u8; 0],
}
#[repr(C)]
pub struct specdec_generation {
    _private: [u8; 0],
}
#[repr(C)]
pub struct specdec_engine {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_session_params {
    pub strategy: specdec_strategy,
    pub n_seq: u32,
    pub n_draft_max: i32,
    pub n_draft_min: i32,
    pub p_min: f32,
    pub draft_vocab: i32,
    pub draft_vocab_ranking: *const llama_token,
    pub n_draft_vocab_ranking: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_draft_sampling {
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub seed: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_draft_request {
    pub seq_id: llama_seq_id,
    pub n_past: llama_pos,
    pub id_last: llama_token,
    pub n_max: i32,
    pub sampling: *const specdec_draft_sampling,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_token_prob {
    pub token: llama_token,
    pub p: f32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct specdec_session_stats {
    pub n_begin: u64,
    pub n_process: u64,
    pub n_draft: u64,
    pub n_proposals: u64,
    pub n_drafted: u64,
    pub n_accept: u64,
    pub n_accepted: u64,
    pub n_accepted_at: [u64; SPECDEC_MAX_DRAFT],
    pub t_begin_us: i64,
    pub t_process_us: i64,
    pub t_draft_us: i64,
    pub t_accept_us: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_token_logprob {
    pub token: llama_token,
    pub logprob: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_logit_bias {
    pub token: llama_token,
    pub bias: f32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct specdec_generate_params {
    pub n_predict: i32,
    pub n_draft: i32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub seed: u32,
    pub ignore_eog: bool,
    pub stop_strings: *const *const c_char,
    pub n_stop_strings: usize,
    pub synthetic_acceptance: f32,
    pub n_top_logprobs: i32,
    pub prompt_logprobs: bool,
    pub logit_bias: *const specdec_logit_bias,
    pub n_logit_bias: usize,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub repeat_penalty: f32,
    pub repeat_last_n: i32,
    pub grammar: *const c_char,
    pub grammar_triggers: *const *const c_char,
    pub n_grammar_triggers: usize,
    pub grammar_prefix: *const c_char,
    pub accept: specdec_accept_mode,
    pub reasoning_start: *const c_char,
    pub reasoning_end: *const c_char,
    pub reasoning_budget: i32,
    pub reasoning_budget_message: *const c_char,
    pub reasoning_prefix: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct specdec_sequence_stats {
    pub n_generated: u64,
    pub n_steps: u64,
    pub n_drafted: u64,
    pub n_accepted: u64,
    pub n_proposed_at: [u64; SPECDEC_MAX_DRAFT],
    pub n_accepted_at: [u64; SPECDEC_MAX_DRAFT],
    pub n_reached_at: [u64; SPECDEC_MAX_DRAFT],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_generation_times {
    pub t_prefill_us: i64,
    pub t_verify_us: i64,
    pub t_draft_us: i64,
    pub t_total_us: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_engine_params {
    pub n_seq: u32,
    pub max_waiting: u32,
    pub n_prefill_chunk: i32,
    pub keep_finished: bool,
    pub reuse_prompts: bool,
    pub prompt_cache_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct specdec_request_times {
    pub t_first_token_us: i64,
    pub t_total_us: i64,
}

#[repr(C)]
pub struct specdec_engine_event {
    pub type_: specdec_engine_event_type,
    pub id: specdec_request_id,
    pub seq_id: llama_seq_id,
    pub token: llama_token,
    pub piece: *const c_char,
    pub n_piece: usize,
    pub logprob: *const specdec_token_logprob,
    pub top_logprobs: *const specdec_token_logprob,
    pub n_top_logprobs: usize,
    pub n_prompt_cached: usize,
    pub stop: specdec_stop_reason,
    pub stats: specdec_sequence_stats,
    pub times: specdec_request_times,
    pub tokens: *const llama_token,
    pub n_tokens: usize,
    pub text: *const c_char,
    pub n_text: usize,
    pub logprobs: *const f32,
    pub prompt_logprobs: *const f32,
    pub n_prompt_logprobs: usize,
    pub prompt_top_logprobs: *const specdec_token_logprob,
    pub n_prompt_top_logprobs: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct specdec_model_info {
    pub architecture: [c_char; 64],
    pub name: [c_char; 128],
    pub file_size: u64,
    pub n_params: u64,
    pub n_tensors: u32,
    pub n_vocab: u32,
    pub n_embd: u32,
    pub n_layer: u32,
    pub n_layer_nextn: u32,
    pub n_target_layers: u32,
    pub target_layers: [i32; SPECDEC_MAX_TARGET_LAYERS],
    pub target_hidden_size: u32,
    pub block_size: u32,
    pub dflash2: bool,
    pub markov_head: bool,
    pub strategies: u32,
}

pub type specdec_token_callback = Option<
    unsafe extern "C" fn(
        seq_id: llama_seq_id,
        token: llama_token,
        piece: *const c_char,
        n_piece: usize,
        user_data: *mut c_void,
    ) -> bool,
>;

pub type specdec_engine_callback =
    Option<unsafe extern "C" fn(event: *const specdec_engine_event, user_data: *mut c_void) -> bool>;

extern "C" {
    pub fn specdec_version() -> *const c_char;
    pub fn specdec_llama_release() -> *const c_char;
    pub fn specdec_llama_commit() -> *const c_char;
    pub fn specdec_cpu_variant() -> *const c_char;
    pub fn specdec_set_exact_kernels(exact: bool) -> specdec_status;
    pub fn specdec_exact_kernels() -> bool;
    pub fn specdec_status_kind_of(status: specdec_status) -> specdec_status_kind;
    pub fn specdec_status_name(status: specdec_status) -> *const c_char;
    pub fn specdec_last_error() -> *const c_char;
    pub fn specdec_set_upstream_log_level(level: c_int);
    pub fn specdec_strategy_name(strategy: specdec_strategy) -> *const c_char;
    pub fn specdec_strategy_from_name(name: *const c_char, out: *mut specdec_strategy) -> specdec_status;
    pub fn specdec_strategy_needs_draft_context(strategy: specdec_strategy) -> bool;
    pub fn specdec_session_default_params() -> specdec_session_params;
    pub fn specdec_session_params_validate(params: *const specdec_session_params) -> specdec_status;
    pub fn specdec_draft_context_init(
        target: *mut llama_context,
        draft_model: *mut llama_model,
        params: *const specdec_session_params,
        cparams: llama_context_params,
        out: *mut *mut llama_context,
    ) -> specdec_status;
    pub fn specdec_session_init(
        target: *mut llama_context,
        draft: *mut llama_context,
        params: *const specdec_session_params,
        out: *mut *mut specdec_session,
    ) -> specdec_status;
    pub fn specdec_session_free(session: *mut specdec_session);
    pub fn specdec_session_get_params(session: *const specdec_session) -> specdec_session_params;
    pub fn specdec_session_rank_draft_vocab(
        session: *mut specdec_session,
        counts: *const u64,
        n_counts: usize,
        n_entered: *mut i32,
    ) -> specdec_status;
    pub fn specdec_session_is_quiescent(session: *const specdec_session) -> bool;
    pub fn specdec_session_reads_target_features(session: *const specdec_session) -> bool;
    pub fn specdec_session_begin(
        session: *mut specdec_session,
        seq_id: llama_seq_id,
        prompt: *const llama_token,
        n_prompt: usize,
    ) -> specdec_status;
    pub fn specdec_session_decode_target(session: *mut specdec_session, batch: *const llama_batch) -> specdec_status;
    pub fn specdec_session_process(session: *mut specdec_session, batch: *const llama_batch) -> specdec_status;
    pub fn specdec_session_decode_target_and_process(
        session: *mut specdec_session,
        batch: *const llama_batch,
    ) -> specdec_status;
    pub fn specdec_session_draft(
        session: *mut specdec_session,
        requests: *const specdec_draft_request,
        n_requests: usize,
    ) -> specdec_status;
    pub fn specdec_session_proposal(
        session: *const specdec_session,
        seq_id: llama_seq_id,
        tokens: *mut *const llama_token,
        n_tokens: *mut usize,
    ) -> specdec_status;
    pub fn specdec_session_proposal_probs(
        session: *const specdec_session,
        seq_id: llama_seq_id,
        index: usize,
        probs: *mut *const specdec_token_prob,
        n_probs: *mut usize,
    ) -> specdec_status;
    pub fn specdec_session_accept(session: *mut specdec_session, seq_id: llama_seq_id, n_accepted: u16) -> specdec_status;
    pub fn specdec_session_n_nextn_heads(session: *const specdec_session) -> i32;
    pub fn specdec_session_set_nextn_head(session: *mut specdec_session, head: i32) -> specdec_status;
    pub fn specdec_session_state_get(
        session: *const specdec_session,
        seq_id: llama_seq_id,
        dst: *mut u8,
        capacity: usize,
        n_written: *mut usize,
    ) -> specdec_status;
    pub fn specdec_session_state_set(
        session: *mut specdec_session,
        seq_id: llama_seq_id,
        src: *const u8,
        size: usize,
    ) -> specdec_status;
    pub fn specdec_session_remove_range(
        session: *mut specdec_session,
        role: specdec_context_role,
        seq_id: llama_seq_id,
        p0: llama_pos,
        p1: llama_pos,
    ) -> specdec_status;
    pub fn specdec_session_move_sequence(session: *mut specdec_session, from: llama_seq_id, to: llama_seq_id) -> specdec_status;
    pub fn specdec_session_copy_sequence(session: *mut specdec_session, from: llama_seq_id, to: llama_seq_id) -> specdec_status;
    pub fn specdec_session_can_move_sequences(session: *const specdec_session) -> bool;
    pub fn specdec_session_context_state_get(
        session: *mut specdec_session,
        role: specdec_context_role,
        seq_id: llama_seq_id,
        flags: u32,
        dst: *mut u8,
        capacity: usize,
        n_written: *mut usize,
    ) -> specdec_status;
    pub fn specdec_session_context_state_set(
        session: *mut specdec_session,
        role: specdec_context_role,
        seq_id: llama_seq_id,
        flags: u32,
        src: *const u8,
        size: usize,
    ) -> specdec_status;
    pub fn specdec_session_get_stats(session: *const specdec_session) -> specdec_session_stats;
    pub fn specdec_generate_default_params() -> specdec_generate_params;
    pub fn specdec_logit_shaping_validate(vocab: *const llama_vocab, params: *const specdec_generate_params) -> specdec_status;
    pub fn specdec_generate(
        session: *mut specdec_session,
        target: *mut llama_context,
        prompts: *const *const llama_token,
        n_prompt_tokens: *const usize,
        n_prompts: usize,
        params: *const specdec_generate_params,
        callback: specdec_token_callback,
        user_data: *mut c_void,
        out: *mut *mut specdec_generation,
    ) -> specdec_status;
    pub fn specdec_generation_free(generation: *mut specdec_generation);
    pub fn specdec_generation_n_sequences(generation: *const specdec_generation) -> usize;
    pub fn specdec_generation_tokens(generation: *const specdec_generation, i: usize, n_tokens: *mut usize) -> *const llama_token;
    pub fn specdec_generation_text(generation: *const specdec_generation, i: usize, n_bytes: *mut usize) -> *const c_char;
    pub fn specdec_generation_logprobs(generation: *const specdec_generation, i: usize, n: *mut usize) -> *const f32;
    pub fn specdec_generation_top_logprobs(
        generation: *const specdec_generation,
        i: usize,
        n: *mut usize,
    ) -> *const specdec_token_logprob;
    pub fn specdec_generation_prompt_logprobs(
        generation: *const specdec_generation,
        i: usize,
        n: *mut usize,
        top: *mut *const specdec_token_logprob,
        n_top: *mut usize,
    ) -> *const f32;
    pub fn specdec_generation_stop_reason(generation: *const specdec_generation, i: usize) -> specdec_stop_reason;
    pub fn specdec_generation_sequence_stats(generation: *const specdec_generation, i: usize) -> specdec_sequence_stats;
    pub fn specdec_generation_get_times(generation: *const specdec_generation) -> specdec_generation_times;
    pub fn specdec_engine_default_params() -> specdec_engine_params;
    pub fn specdec_engine_init(
        session: *mut specdec_session,
        target: *mut llama_context,
        params: *const specdec_engine_params,
        callback: specdec_engine_callback,
        user_data: *mut c_void,
        out: *mut *mut specdec_engine,
    ) -> specdec_status;
    pub fn specdec_engine_free(engine: *mut specdec_engine);
    pub fn specdec_engine_add(
        engine: *mut specdec_engine,
        prompt: *const llama_token,
        n_prompt: usize,
        params: *const specdec_generate_params,
        id: *mut specdec_request_id,
    ) -> specdec_status;
    pub fn specdec_engine_add_n(
        engine: *mut specdec_engine,
        prompt: *const llama_token,
        n_prompt: usize,
        params: *const specdec_generate_params,
        n: u32,
        first_id: *mut specdec_request_id,
    ) -> specdec_status;
    pub fn specdec_engine_cancel(engine: *mut specdec_engine, id: specdec_request_id) -> specdec_status;
    pub fn specdec_engine_pause(engine: *mut specdec_engine, id: specdec_request_id, paused: bool) -> specdec_status;
    pub fn specdec_engine_step(engine: *mut specdec_engine) -> specdec_status;
    pub fn specdec_engine_run_until_idle(engine: *mut specdec_engine) -> specdec_status;
    pub fn specdec_engine_has_work(engine: *const specdec_engine) -> bool;
    pub fn specdec_inspect(path: *const c_char, out: *mut specdec_model_info) -> specdec_status;
    pub fn specdec_inspect_buffer(data: *const c_void, size: usize, out: *mut specdec_model_info) -> specdec_status;
    pub fn specdec_check_pair(
        target_path: *const c_char,
        draft_path: *const c_char,
        strategy: specdec_strategy,
    ) -> specdec_status;
    pub fn specdec_check_exact(path: *const c_char) -> specdec_status;
    pub fn specdec_detect_strategy(
        target_path: *const c_char,
        draft_path: *const c_char,
        out: *mut specdec_strategy,
    ) -> specdec_status;
    pub fn specdec_tokenize(
        vocab: *const llama_vocab,
        text: *const c_char,
        n_text: usize,
        add_special: bool,
        parse_special: bool,
        tokens: *mut llama_token,
        capacity: usize,
        n_tokens: *mut usize,
    ) -> specdec_status;
    pub fn specdec_detokenize(
        vocab: *const llama_vocab,
        tokens: *const llama_token,
        n_tokens: usize,
        remove_special: bool,
        unparse_special: bool,
        text: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> specdec_status;
    pub fn specdec_token_to_piece(
        vocab: *const llama_vocab,
        token: llama_token,
        lstrip: i32,
        special: bool,
        piece: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> specdec_status;
    pub fn specdec_rpc_add_servers(servers: *const c_char) -> specdec_status;
}
