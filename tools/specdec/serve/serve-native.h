// `specdec serve`, llama-server's own endpoints, with its request and
// response shapes: POST /completion (its native completion), /tokenize, /detokenize and /apply-template, GET
// /props and /v1/models/{id}. Each is a function from
// a request body to an answer body, over the same request type and chat
// template as the OpenAI routes; the routes (serve-routes.cpp) call them.
// Thread-safe: they read the service only.
#pragma once

#include "serve-openai.h"
#include "serve-routes.h"

#include <nlohmann/json.hpp>

#include <string_view>

namespace cli::serve {

// What a native completion asks for beyond the OpenAI request it is read into.
struct native_completion {
    bool           return_tokens = false; // `return_tokens`: each answer's token ids in `tokens`
    int32_t        n_probs = 0;           // `n_probs`: the most likely tokens at each output position
    nlohmann::json settings;              // the answer's generation_settings (native_settings)
    // `response_fields`: the answer projected onto these paths (llama-server's
    // json_get_nested_values: "a/b" is b within a), keyed by the path; empty: all of it.
    std::vector<std::string> response_fields;
};

// POST /completion's body, in llama-server's names, read into the request
// /v1/completions would be (parse_request's checks and fields: prompt as
// text, tokens or both mixed, a {"prompt_string"} object, or a list of
// several prompts, each answered on its own; stream, stop, seed, the
// samplers, grammar, json_schema, logit_bias in OpenAI's and llama-server's
// forms, penalties, ignore_eos), with: `n_predict` (-1 or absent: until the
// context is full; `max_tokens` is read too), `n_probs`
// (0..SPECDEC_MAX_TOP_LOGPROBS), `return_tokens`, `response_fields` (a list
// of strings), and `cache_prompt` and `id_slot` (-1..slots - 1), checked
// and otherwise without effect: the engine always reuses what a slot holds
// and chooses the slot, which changes no token. Throws api_error 400 as
// parse_request does; also for n other than 1, and llama-server fields this
// server does not implement set to other than their defaults
// (post_sampling_probs, t_max_predict_ms, n_indent, samplers, min_keep,
// lora, image_data, multimodal_data, and a prompt object's multimodal_data):
// code unsupported_parameter.
parsed_request parse_native_completion(std::string_view body, const request_limits & limits, native_completion & out);

// POST /infill's text: what goes before, after, and at the start of the middle.
struct infill_input {
    std::string prefix;  // input_prefix (required)
    std::string suffix;  // input_suffix (required)
    std::string prompt;  // prompt: the middle's beginning (optional)
    struct chunk {
        std::string filename; // "tmp" when absent
        std::string text;
    };
    std::vector<chunk> extra; // input_extra: other files' text, before the prefix
};

// POST /infill's body: input_prefix, input_suffix, prompt and input_extra
// [{text, filename}] (strings), and otherwise what /completion reads
// (parse_native_completion, whose errors it throws).
parsed_request parse_native_infill(std::string_view body, const request_limits & limits, native_completion & out, infill_input & in);

// llama-server's fill-in-the-middle prompt from `in`, with the vocabulary's
// FIM tokens: [extra context, as repository files with FIM_REP/FIM_SEP where
// the vocabulary has them] [BOS] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID,
// the prefix's last 3/4 x n_batch tokens and the suffix's first
// n_batch / 4 - 2 - |prompt| kept, extra context as room allows (n_ctx -
// n_batch + 2, llama-server's with its default n_predict). Throws api_error
// 400 (code not_supported) when the vocabulary lacks FIM_PRE, FIM_SUF or
// FIM_MID, and for text it cannot tokenize.
std::vector<llama_token> infill_prompt(const llama_vocab * vocab, const infill_input & in, int32_t n_batch, int32_t n_ctx);

// generation_settings, llama-server's names for the engine's parameters;
// logit_bias lists the engine's biases as llama-server does, [{bias, token}]
// in the request's order, with ignore_eos's -infinity on each
// end-of-generation token last (-infinity written as null).
nlohmann::json native_settings(const specdec::request_params & p, bool stream, int32_t n_probs, const std::vector<std::string> & stop);

// The answer of a finished native completion (non-streaming, or the last
// event of a stream, whose `content` is then ""), for one prompt (several
// prompts: the routes answer a list of these, each with its index): index, content, tokens
// (with return_tokens), id_slot, stop true, model, tokens_predicted,
// tokens_evaluated, generation_settings, prompt, has_new_line, truncated,
// stop_type (eos | word | limit | none), stopping_word (the stop string
// that ended it, else ""), tokens_cached, timings (cache_n, prompt_n,
// prompt_ms, ..., predicted_per_second, draft_n and draft_n_accepted when
// it drafted; the rates of predicted tokens leave out the first, which comes
// with the prompt, as llama-server's), and completion_probabilities (n_probs
// > 0, not streamed); with nc.response_fields, only those paths (as
// llama-server, the stream's last event included).
nlohmann::json native_completion_body(const native_completion & nc, const response_info & info, const finished_request & f,
                                      const std::string & content, const std::string & prompt, const std::string & stopping_word,
                                      bool stream);

// One event of a native stream: {index, content, tokens, stop: false,
// id_slot, tokens_predicted, tokens_evaluated}, and completion_probabilities
// of its tokens (n_probs > 0). `lp`: its tokens with their log-probabilities.
nlohmann::json native_chunk_body(const native_completion & nc, const response_info & info, std::string_view content,
                                 const specdec::sequence_result & lp, size_t n_predicted, size_t n_prompt);

// /tokenize: {content, add_special = false, parse_special = true,
// with_pieces = false} -> {tokens: [id...]}, or with pieces [{id, piece}]
// (the piece a string when it is valid UTF-8, else its bytes). Throws
// api_error 400 for a bad field or text the vocabulary cannot represent.
nlohmann::json tokenize_answer(const service & svc, std::string_view body, const request_limits & limits);

// /detokenize: {tokens: [id...]} -> {content}. 400 for an id outside the vocabulary.
nlohmann::json detokenize_answer(const service & svc, std::string_view body, const request_limits & limits);

// /apply-template: a chat request's body (messages, tools, reasoning
// fields) -> {prompt}: the text the model would be given. 400 as a chat
// completion's would be.
nlohmann::json apply_template_answer(const service & svc, std::string_view body, const request_limits & limits);

// GET /slots: what each slot is doing (scheduler::slots), in llama-server's
// shape: id, n_ctx, speculative, is_processing, and for a slot that held a
// request: id_task, n_prompt_tokens, n_prompt_tokens_cache, params (as
// generation_settings), next_token [{has_next_token, has_new_line, n_remain, n_decoded}]
// (an idle slot: n_remain -1 and n_decoded 0, as llama-server's).
nlohmann::json slots_answer(const service & svc);

// GET /props: the server's settings, as llama-server names them:
// default_generation_settings (n_ctx, params), total_slots, model_alias,
// model_path, chat_template, bos/eos tokens, modalities, build_info, and
// specdec's speculative settings.
nlohmann::json props_answer(const service & svc);

// An OpenAI model object for `id`, with llama-server's additions: the
// server's aliases and tags, and meta (vocab_type, n_vocab, n_ctx,
// n_ctx_train, n_embd, n_params, size in bytes, ftype).
nlohmann::json model_object(const service & svc, const std::string & id, int64_t created);

} // namespace cli::serve
