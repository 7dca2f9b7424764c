// `specdec serve`, Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens): a request body translated into the chat
// request OpenAI's parser validates (serve-openai.h), and the engine's
// results formatted back into Anthropic's message, stream events and
// errors. Pure functions (no model, no engine, no sockets), so the unit
// tier checks them; below this file nothing knows which API asked.
#pragma once

#include "serve-openai.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace cli::serve {

// Which API family a request came in by: it selects the formatter of its
// answers and errors (the Responses API's errors are OpenAI's; llama: llama-server's
// native /completion and /infill, whose errors are OpenAI's shape too).
enum class api_family { openai, anthropic, responses, llama };

// An Anthropic request body as the equivalent OpenAI chat body (JSON text):
// system (a string or text blocks) as a first system message; each message's
// blocks (text; tool_use as tool_calls; tool_result as tool messages, before
// the turn's text, an is_error result's text prefixed "Error: "; thinking as
// reasoning_content); max_tokens (required unless `count_tokens`),
// stop_sequences as stop, temperature (within [0, 1]), top_p, top_k, stream;
// tools ({name, description, input_schema}, key order kept) and tool_choice
// (auto, any: required, tool: that function, none; disable_parallel_tool_use:
// parallel_tool_calls false); thinking (enabled: enable_thinking and
// budget_tokens as the reasoning budget; disabled: enable_thinking false).
// `metadata` and `service_tier` do not change the result and are dropped.
// Throws api_error 400 naming the field for any other field, a block of
// another type (images, documents, redacted thinking), or a bad value;
// parse_json_body's bounds apply.
std::string anthropic_chat_body(std::string_view body, const request_limits & limits, bool count_tokens = false);

// The chat request an Anthropic body means: parse_request(endpoint::chat)
// of anthropic_chat_body, so every field is validated as a chat
// completion's; its `stop` holds the client's stop sequences only.
parsed_request parse_anthropic_request(std::string_view body, const request_limits & limits, bool count_tokens = false);

// {"type": "error", "error": {"type", "message"}}: the type by the status
// (400 and 408, 411, 413, 431: invalid_request_error, 401
// authentication_error, 403 permission_error, 404 not_found_error, 429
// rate_limit_error, 503 overloaded_error, else api_error).
nlohmann::json anthropic_error_body(const api_error & e);

// A new tool_use block's id: "toolu_" and 24 random letters and digits.
std::string new_tool_use_id();

// What an answer's end is to Anthropic, from the engine's stop and the
// request's stop sequences (`stop`, the client's only) found in the
// output's tokens' text (`pieces`: the answer's text and, after a stop
// string, the text that completed it): stop_reason "max_tokens" (the budget,
// the context), "tool_use" (ended by itself with calls), "stop_sequence"
// (with the sequence that occurs first in `pieces` past the answer's text),
// else "end_turn"; stop_sequence null but with stop_sequence; stop_reason
// null when cancelled or failed.
struct anthropic_stop {
    nlohmann::json reason;
    nlohmann::json sequence;
};
anthropic_stop anthropic_stop_of(const finished_request & f, const parsed_answer & a, const std::vector<std::string> & stop,
                                 const std::string & pieces);

// The whole message: {id, type "message", role "assistant", model, content:
// [a thinking block {thinking, signature ""} when there is reasoning, a text
// block when content is not empty, a tool_use block {id, name, input} per
// call (arguments that are not a JSON object: {})], stop_reason,
// stop_sequence, usage {input_tokens, output_tokens}, specdec (stats_body)}.
// The calls carry their ids (new_tool_use_id() for those without).
nlohmann::json anthropic_message_body(const response_info & info, const finished_request & f, const parsed_answer & a,
                                      const anthropic_stop & stop);

// {"input_tokens": n}: /v1/messages/count_tokens' answer.
nlohmann::json anthropic_count_tokens_body(size_t n_input);

// What a streamed message has sent so far: the chat deltas (answer_delta's
// state) and its content blocks (the last started is the open one, if any).
struct anthropic_stream {
    answer_stream sent;
    int           n_blocks = 0; // blocks started; the open one's index is n_blocks - 1
    std::string   open;         // the open block's type ("" none): "thinking", "text" or "tool_use"
};

// The stream's first event: message_start, its message with no content, stop_reason null, usage {input_tokens, output_tokens 0}.
std::string anthropic_stream_start(const response_info & info, size_t n_prompt);

// The events of what `a` (the answer read so far; `partial`: more may come)
// adds to what `s` sent, from answer_delta: a block is stopped when another
// kind begins (content_block_stop), then started (content_block_start:
// thinking and text empty, tool_use with its id, name and input {}), and
// its delta sent (thinking_delta, text_delta, input_json_delta with
// partial_json). "" when nothing is new.
std::string anthropic_stream_events(anthropic_stream & s, parsed_answer a, bool partial);

// The stream's end: the open block stopped, message_delta ({stop_reason,
// stop_sequence}, usage {output_tokens}, specdec), message_stop.
std::string anthropic_stream_end(anthropic_stream & s, const response_info & info, const finished_request & f,
                                 const anthropic_stop & stop);

} // namespace cli::serve
