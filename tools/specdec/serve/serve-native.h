// `specdec serve`, llama-server's own endpoints besides completions, with
// its request and response shapes: POST /tokenize, /detokenize and
// /apply-template, GET /props and /v1/models/{id}. Each is a function from
// a request body to an answer body, over the same request type and chat
// template as the OpenAI routes; the routes (serve-routes.cpp) call them.
// Thread-safe: they read the service only.
#pragma once

#include "serve-openai.h"
#include "serve-routes.h"

#include <nlohmann/json.hpp>

#include <string_view>

namespace cli::serve {

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

// GET /props: the server's settings, as llama-server names them:
// default_generation_settings (n_ctx, params), total_slots, model_alias,
// model_path, chat_template, bos/eos tokens, modalities, build_info, and
// specdec's speculative settings.
nlohmann::json props_answer(const service & svc);

// An OpenAI model object for `id`.
nlohmann::json model_object(const std::string & id, int64_t created);

} // namespace cli::serve
