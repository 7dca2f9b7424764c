"""ctypes declarations of specdec.h and of the few llama.h functions the
package calls (loading a model, creating a context).

Everything here mirrors a C declaration one to one; tests/test_header.py
compares these declarations with the headers, so a header change that is
not mirrored here fails the tests.

The library is found, in order, at:
  1. $SPECDEC_LIBRARY (a path to libspecdec.so);
  2. $SPECDEC_BUILD_DIR/src/libspecdec.so;
  3. build/src/libspecdec.so of the checkout this package sits in
     (bindings/python/specdec -> ../../../build);
  4. the system's library path (libspecdec.so.0, as installed by
     `cmake --install`).
libllama is reached through libspecdec's own dependency (dlsym searches a
library's dependencies), so the two always match.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import pathlib
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)

# --- constants of specdec.h ---------------------------------------------------
SPECDEC_MAX_SEQ = 256
SPECDEC_MAX_DRAFT = 128
SPECDEC_MAX_PROMPT_TOKENS = 16777216
SPECDEC_MAX_STATE_BYTES = 67108864
SPECDEC_MAX_GRAMMAR_BYTES = 131072
SPECDEC_MAX_GRAMMAR_NESTING = 128
SPECDEC_MAX_GRAMMAR_RULES = 4096
SPECDEC_N_DRAFT_AUTO = -2
SPECDEC_DRAFT_VOCAB_AUTO = -1
SPECDEC_DRAFT_VOCAB_DEFAULT = 32768
SPECDEC_DRAFT_VOCAB_AUTO_MIN = 65536
SPECDEC_MIN_SAMPLING_TEMPERATURE = 1e-4
SPECDEC_MAX_TOP_LOGPROBS = 20
SPECDEC_MAX_TARGET_LAYERS = 16

# specdec_accept_mode
SPECDEC_ACCEPT_EXACT = 0
SPECDEC_ACCEPT_REJECTION = 1

LLAMA_TOKEN_NULL = -1
LLAMA_CONTEXT_TYPE_DEFAULT = 0
LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY = 1

# C enums are `int` on every platform llama.cpp builds for.
c_enum = c_int
llama_token = c_int32
llama_pos = c_int32
llama_seq_id = c_int32
specdec_request_id = c_uint64


# --- structs of specdec.h -----------------------------------------------------
class specdec_session_params(Structure):
    _fields_ = [
        ("strategy", c_enum),
        ("n_seq", c_uint32),
        ("n_draft_max", c_int32),
        ("n_draft_min", c_int32),
        ("p_min", c_float),
        ("draft_vocab", c_int32),
        ("draft_vocab_ranking", POINTER(c_int32)),
        ("n_draft_vocab_ranking", c_size_t),
    ]


class specdec_draft_sampling(Structure):
    _fields_ = [
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("seed", c_uint64),
    ]


class specdec_draft_request(Structure):
    _fields_ = [
        ("seq_id", llama_seq_id),
        ("n_past", llama_pos),
        ("id_last", llama_token),
        ("n_max", c_int32),
        ("sampling", POINTER(specdec_draft_sampling)),
    ]


class specdec_token_prob(Structure):
    _fields_ = [("token", llama_token), ("p", c_float)]


class specdec_session_stats(Structure):
    _fields_ = [
        ("n_begin", c_uint64),
        ("n_process", c_uint64),
        ("n_draft", c_uint64),
        ("n_proposals", c_uint64),
        ("n_drafted", c_uint64),
        ("n_accept", c_uint64),
        ("n_accepted", c_uint64),
        ("n_accepted_at", c_uint64 * SPECDEC_MAX_DRAFT),
        ("t_begin_us", c_int64),
        ("t_process_us", c_int64),
        ("t_draft_us", c_int64),
        ("t_accept_us", c_int64),
    ]


class specdec_token_logprob(Structure):
    _fields_ = [("token", llama_token), ("logprob", c_float)]


class specdec_logit_bias(Structure):
    _fields_ = [("token", llama_token), ("bias", c_float)]


class specdec_generate_params(Structure):
    _fields_ = [
        ("n_predict", c_int32),
        ("n_draft", c_int32),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("seed", c_uint32),
        ("ignore_eog", c_bool),
        ("stop_strings", POINTER(c_char_p)),
        ("n_stop_strings", c_size_t),
        ("synthetic_acceptance", c_float),
        ("n_top_logprobs", c_int32),
        ("prompt_logprobs", c_bool),
        ("logit_bias", POINTER(specdec_logit_bias)),
        ("n_logit_bias", c_size_t),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_int32),
        ("grammar", c_char_p),
        ("grammar_triggers", POINTER(c_char_p)),
        ("n_grammar_triggers", c_size_t),
        ("grammar_prefix", c_char_p),
        ("accept", c_enum),
        ("reasoning_start", c_char_p),
        ("reasoning_end", c_char_p),
        ("reasoning_budget", c_int32),
        ("reasoning_budget_message", c_char_p),
        ("reasoning_prefix", c_char_p),
    ]


class specdec_sequence_stats(Structure):
    _fields_ = [
        ("n_generated", c_uint64),
        ("n_steps", c_uint64),
        ("n_drafted", c_uint64),
        ("n_accepted", c_uint64),
        ("n_proposed_at", c_uint64 * SPECDEC_MAX_DRAFT),
        ("n_accepted_at", c_uint64 * SPECDEC_MAX_DRAFT),
        ("n_reached_at", c_uint64 * SPECDEC_MAX_DRAFT),
    ]


class specdec_generation_times(Structure):
    _fields_ = [
        ("t_prefill_us", c_int64),
        ("t_verify_us", c_int64),
        ("t_draft_us", c_int64),
        ("t_total_us", c_int64),
    ]


class specdec_engine_params(Structure):
    _fields_ = [
        ("n_seq", c_uint32),
        ("max_waiting", c_uint32),
        ("n_prefill_chunk", c_int32),
        ("keep_finished", c_bool),
        ("reuse_prompts", c_bool),
        ("prompt_cache_bytes", c_uint64),
    ]


class specdec_request_times(Structure):
    _fields_ = [("t_first_token_us", c_int64), ("t_total_us", c_int64)]


class specdec_engine_event(Structure):
    _fields_ = [
        ("type", c_enum),
        ("id", specdec_request_id),
        ("seq_id", llama_seq_id),
        ("token", llama_token),
        ("piece", POINTER(c_char)),
        ("n_piece", c_size_t),
        ("logprob", POINTER(specdec_token_logprob)),
        ("top_logprobs", POINTER(specdec_token_logprob)),
        ("n_top_logprobs", c_size_t),
        ("n_prompt_cached", c_size_t),
        ("stop", c_enum),
        ("stats", specdec_sequence_stats),
        ("times", specdec_request_times),
        ("tokens", POINTER(llama_token)),
        ("n_tokens", c_size_t),
        ("text", POINTER(c_char)),
        ("n_text", c_size_t),
        ("logprobs", POINTER(c_float)),
        ("prompt_logprobs", POINTER(c_float)),
        ("n_prompt_logprobs", c_size_t),
        ("prompt_top_logprobs", POINTER(specdec_token_logprob)),
        ("n_prompt_top_logprobs", c_size_t),
    ]


class specdec_model_info(Structure):
    _fields_ = [
        ("architecture", c_char * 64),
        ("name", c_char * 128),
        ("file_size", c_uint64),
        ("n_params", c_uint64),
        ("n_tensors", c_uint32),
        ("n_vocab", c_uint32),
        ("n_embd", c_uint32),
        ("n_layer", c_uint32),
        ("n_layer_nextn", c_uint32),
        ("n_target_layers", c_uint32),
        ("target_layers", c_int32 * SPECDEC_MAX_TARGET_LAYERS),
        ("target_hidden_size", c_uint32),
        ("block_size", c_uint32),
        ("dflash2", c_bool),
        ("markov_head", c_bool),
        ("strategies", c_uint32),
    ]


# --- structs of llama.h (only those passed by value or read) --------------------
class llama_model_params(Structure):
    _fields_ = [
        ("devices", c_void_p),
        ("tensor_buft_overrides", c_void_p),
        ("n_gpu_layers", c_int32),
        ("split_mode", c_enum),
        ("load_mode", c_enum),
        ("lazy_mode", c_enum),
        ("main_gpu", c_int32),
        ("tensor_split", POINTER(c_float)),
        ("progress_callback", c_void_p),
        ("progress_callback_user_data", c_void_p),
        ("kv_overrides", c_void_p),
        ("vocab_only", c_bool),
        ("check_tensors", c_bool),
        ("use_extra_bufts", c_bool),
        ("no_host", c_bool),
        ("no_alloc", c_bool),
        ("load_mtp", c_bool),
    ]


class llama_context_params(Structure):
    _fields_ = [
        ("n_ctx", c_uint32),
        ("n_batch", c_uint32),
        ("n_ubatch", c_uint32),
        ("n_seq_max", c_uint32),
        ("n_rs_seq", c_uint32),
        ("n_outputs_max", c_uint32),
        ("n_outputs_max_per_seq", c_uint32),
        ("n_threads", c_int32),
        ("n_threads_batch", c_int32),
        ("ctx_type", c_enum),
        ("rope_scaling_type", c_enum),
        ("pooling_type", c_enum),
        ("attention_type", c_enum),
        ("flash_attn_type", c_enum),
        ("rope_freq_base", c_float),
        ("rope_freq_scale", c_float),
        ("yarn_ext_factor", c_float),
        ("yarn_attn_factor", c_float),
        ("yarn_beta_fast", c_float),
        ("yarn_beta_slow", c_float),
        ("yarn_orig_ctx", c_uint32),
        ("defrag_thold", c_float),
        ("cb_eval", c_void_p),
        ("cb_eval_user_data", c_void_p),
        ("type_k", c_enum),
        ("type_v", c_enum),
        ("abort_callback", c_void_p),
        ("abort_callback_data", c_void_p),
        ("embeddings", c_bool),
        ("offload_kqv", c_bool),
        ("no_perf", c_bool),
        ("op_offload", c_bool),
        ("swa_full", c_bool),
        ("kv_unified", c_bool),
        ("samplers", c_void_p),
        ("n_samplers", c_size_t),
        ("ctx_other", c_void_p),
    ]


# --- callbacks ----------------------------------------------------------------
specdec_token_callback = CFUNCTYPE(c_bool, llama_seq_id, llama_token, POINTER(c_char), c_size_t, c_void_p)
specdec_engine_callback = CFUNCTYPE(c_bool, POINTER(specdec_engine_event), c_void_p)
ggml_log_callback = CFUNCTYPE(None, c_enum, c_char_p, c_void_p)

# Opaque handles travel as c_void_p.
_P = c_void_p
_status = c_enum

# name: (restype, [argtypes]). Every specdec function of specdec.h, and the
# llama.h functions the package calls.
SPECDEC_FUNCTIONS = {
    "specdec_version": (c_char_p, []),
    "specdec_llama_release": (c_char_p, []),
    "specdec_llama_commit": (c_char_p, []),
    "specdec_cpu_variant": (c_char_p, []),
    "specdec_set_exact_kernels": (_status, [c_bool]),
    "specdec_exact_kernels": (c_bool, []),
    "specdec_status_kind_of": (c_enum, [_status]),
    "specdec_status_name": (c_char_p, [_status]),
    "specdec_last_error": (c_char_p, []),
    "specdec_set_upstream_log_level": (None, [c_int]),
    "specdec_strategy_name": (c_char_p, [c_enum]),
    "specdec_strategy_from_name": (_status, [c_char_p, POINTER(c_enum)]),
    "specdec_strategy_needs_draft_context": (c_bool, [c_enum]),
    "specdec_session_default_params": (specdec_session_params, []),
    "specdec_session_params_validate": (_status, [POINTER(specdec_session_params)]),
    "specdec_draft_context_init": (
        _status,
        [_P, _P, POINTER(specdec_session_params), llama_context_params, POINTER(c_void_p)],
    ),
    "specdec_session_init": (_status, [_P, _P, POINTER(specdec_session_params), POINTER(c_void_p)]),
    "specdec_session_free": (None, [_P]),
    "specdec_session_get_params": (specdec_session_params, [_P]),
    "specdec_session_rank_draft_vocab": (_status, [_P, POINTER(c_uint64), c_size_t, POINTER(c_int32)]),
    "specdec_session_is_quiescent": (c_bool, [_P]),
    "specdec_session_reads_target_features": (c_bool, [_P]),
    "specdec_session_begin": (_status, [_P, llama_seq_id, POINTER(llama_token), c_size_t]),
    "specdec_session_decode_target": (_status, [_P, _P]),
    "specdec_session_process": (_status, [_P, _P]),
    "specdec_session_decode_target_and_process": (_status, [_P, _P]),
    "specdec_session_draft": (_status, [_P, POINTER(specdec_draft_request), c_size_t]),
    "specdec_session_proposal": (_status, [_P, llama_seq_id, POINTER(POINTER(llama_token)), POINTER(c_size_t)]),
    "specdec_session_proposal_probs": (
        _status,
        [_P, llama_seq_id, c_size_t, POINTER(POINTER(specdec_token_prob)), POINTER(c_size_t)],
    ),
    "specdec_session_accept": (_status, [_P, llama_seq_id, c_uint16]),
    "specdec_session_n_nextn_heads": (c_int32, [_P]),
    "specdec_session_set_nextn_head": (_status, [_P, c_int32]),
    "specdec_session_state_get": (_status, [_P, llama_seq_id, POINTER(c_uint8), c_size_t, POINTER(c_size_t)]),
    "specdec_session_state_set": (_status, [_P, llama_seq_id, POINTER(c_uint8), c_size_t]),
    "specdec_session_remove_range": (_status, [_P, c_enum, llama_seq_id, llama_pos, llama_pos]),
    "specdec_session_move_sequence": (_status, [_P, llama_seq_id, llama_seq_id]),
    "specdec_session_copy_sequence": (_status, [_P, llama_seq_id, llama_seq_id]),
    "specdec_session_can_move_sequences": (c_bool, [_P]),
    "specdec_session_context_state_get": (
        _status,
        [_P, c_enum, llama_seq_id, c_uint32, POINTER(c_uint8), c_size_t, POINTER(c_size_t)],
    ),
    "specdec_session_context_state_set": (_status, [_P, c_enum, llama_seq_id, c_uint32, POINTER(c_uint8), c_size_t]),
    "specdec_session_get_stats": (specdec_session_stats, [_P]),
    "specdec_generate_default_params": (specdec_generate_params, []),
    "specdec_logit_shaping_validate": (_status, [_P, POINTER(specdec_generate_params)]),
    "specdec_generate": (
        _status,
        [
            _P,
            _P,
            POINTER(POINTER(llama_token)),
            POINTER(c_size_t),
            c_size_t,
            POINTER(specdec_generate_params),
            specdec_token_callback,
            c_void_p,
            POINTER(c_void_p),
        ],
    ),
    "specdec_generation_free": (None, [_P]),
    "specdec_generation_n_sequences": (c_size_t, [_P]),
    "specdec_generation_tokens": (POINTER(llama_token), [_P, c_size_t, POINTER(c_size_t)]),
    "specdec_generation_text": (POINTER(c_char), [_P, c_size_t, POINTER(c_size_t)]),
    "specdec_generation_logprobs": (POINTER(c_float), [_P, c_size_t, POINTER(c_size_t)]),
    "specdec_generation_top_logprobs": (POINTER(specdec_token_logprob), [_P, c_size_t, POINTER(c_size_t)]),
    "specdec_generation_prompt_logprobs": (POINTER(c_float), [_P, c_size_t, POINTER(c_size_t), POINTER(POINTER(specdec_token_logprob)),
                                                            POINTER(c_size_t)]),
    "specdec_generation_stop_reason": (c_enum, [_P, c_size_t]),
    "specdec_generation_sequence_stats": (specdec_sequence_stats, [_P, c_size_t]),
    "specdec_generation_get_times": (specdec_generation_times, [_P]),
    "specdec_engine_default_params": (specdec_engine_params, []),
    "specdec_engine_init": (
        _status,
        [_P, _P, POINTER(specdec_engine_params), specdec_engine_callback, c_void_p, POINTER(c_void_p)],
    ),
    "specdec_engine_free": (None, [_P]),
    "specdec_engine_add": (
        _status,
        [_P, POINTER(llama_token), c_size_t, POINTER(specdec_generate_params), POINTER(specdec_request_id)],
    ),
    "specdec_engine_add_n": (
        _status,
        [_P, POINTER(llama_token), c_size_t, POINTER(specdec_generate_params), c_uint32, POINTER(specdec_request_id)],
    ),
    "specdec_engine_cancel": (_status, [_P, specdec_request_id]),
    "specdec_engine_pause": (_status, [_P, specdec_request_id, c_bool]),
    "specdec_engine_step": (_status, [_P]),
    "specdec_engine_run_until_idle": (_status, [_P]),
    "specdec_engine_has_work": (c_bool, [_P]),
    "specdec_inspect": (_status, [c_char_p, POINTER(specdec_model_info)]),
    "specdec_inspect_buffer": (_status, [c_void_p, c_size_t, POINTER(specdec_model_info)]),
    "specdec_check_pair": (_status, [c_char_p, c_char_p, c_enum]),
    "specdec_check_exact": (_status, [c_char_p]),
    "specdec_detect_strategy": (_status, [c_char_p, c_char_p, POINTER(c_enum)]),
    "specdec_tokenize": (
        _status,
        [_P, c_char_p, c_size_t, c_bool, c_bool, POINTER(llama_token), c_size_t, POINTER(c_size_t)],
    ),
    "specdec_detokenize": (
        _status,
        [_P, POINTER(llama_token), c_size_t, c_bool, c_bool, POINTER(c_char), c_size_t, POINTER(c_size_t)],
    ),
    "specdec_token_to_piece": (_status, [_P, llama_token, c_int32, c_bool, POINTER(c_char), c_size_t, POINTER(c_size_t)]),
    "specdec_rpc_add_servers": (_status, [c_char_p]),
}

LLAMA_FUNCTIONS = {
    "llama_backend_init": (None, []),
    "llama_log_set": (None, [ggml_log_callback, c_void_p]),
    "llama_model_default_params": (llama_model_params, []),
    "llama_context_default_params": (llama_context_params, []),
    "llama_model_load_from_file": (c_void_p, [c_char_p, llama_model_params]),
    "llama_model_free": (None, [_P]),
    "llama_init_from_model": (c_void_p, [_P, llama_context_params]),
    "llama_free": (None, [_P]),
    "llama_model_get_vocab": (c_void_p, [_P]),
    "llama_model_n_embd": (c_int32, [_P]),
    "llama_model_is_recurrent": (c_bool, [_P]),
    "llama_model_is_hybrid": (c_bool, [_P]),
    "llama_vocab_n_tokens": (c_int32, [_P]),
    "llama_vocab_is_eog": (c_bool, [_P, llama_token]),
    "llama_n_ctx": (c_uint32, [_P]),
    "llama_n_seq_max": (c_uint32, [_P]),
}

def _candidates() -> list[str]:
    out = []
    env = os.environ.get("SPECDEC_LIBRARY")
    if env:
        return [env]  # an explicit choice is never second-guessed
    build = os.environ.get("SPECDEC_BUILD_DIR")
    if build:
        out.append(str(pathlib.Path(build) / "src" / "libspecdec.so"))
    checkout = pathlib.Path(__file__).resolve().parents[3] / "build" / "src" / "libspecdec.so"
    out.append(str(checkout))
    found = ctypes.util.find_library("specdec")
    if found:
        out.append(found)
    out.append("libspecdec.so.0")
    return out


def _load() -> ctypes.CDLL:
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path}: no such file")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError(
        "specdec: cannot load libspecdec (set SPECDEC_LIBRARY to its path, or SPECDEC_BUILD_DIR "
        "to a build directory); tried: " + "; ".join(errors)
    )


def _declare(lib: ctypes.CDLL, table: dict) -> None:
    for name, (restype, argtypes) in table.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


# CDLL (not PyDLL): ctypes releases the GIL around every call, so another
# Python thread runs (and may call specdec_engine_cancel) while a step decodes.
lib = _load()
_declare(lib, SPECDEC_FUNCTIONS)
_declare(lib, LLAMA_FUNCTIONS)
library_path = lib._name
