// `specdec serve`, OpenAI's Responses API (POST /v1/responses): a request
// body translated into the chat request OpenAI's parser validates
// (serve-openai.h), and the engine's results formatted back into a response
// object, its output items and its stream events. Nothing is stored: a
// request carries its whole conversation. Pure functions (no model, no
// engine, no sockets), so the unit tier checks them; below this file
// nothing knows which API asked.
#pragma once

#include "serve-openai.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace cli::serve {

// A Responses request as the chat request it means, and what its answer repeats.
struct responses_request {
    parsed_request chat;        // what the engine is asked (parse_responses_request)
    // The request's fields a response object repeats, with OpenAI's values
    // for those not given: instructions, max_output_tokens, metadata,
    // parallel_tool_calls, reasoning, temperature, text, tool_choice, tools,
    // top_p, truncation, user; store false (nothing is stored).
    nlohmann::json echo;
    bool encrypted_reasoning = false; // include "reasoning.encrypted_content": reasoning items carry it (responses_item)
};

// The request a Responses body means: the equivalent OpenAI chat body,
// validated by parse_request(endpoint::chat) as any chat completion (its
// 400s and 404), and what the response repeats. The chat body holds:
// instructions as a first system message; `input`, a string (one user
// message) or items: message (roles user, system, developer, assistant;
// content a string or input_text / output_text parts), function_call (an
// assistant's tool call; call_id its id), function_call_output (a tool
// message), reasoning (the assistant's reasoning_content: its content's
// reasoning_text, else its summary's text, else encrypted_content this
// server wrote); consecutive reasoning, assistant message and function_call
// items make one assistant message, in that order. tools ({type
// "function", name, description, parameters, strict}, key order kept),
// tool_choice ("auto", "none", "required", {type "function", name}),
// parallel_tool_calls, max_output_tokens as max_tokens, temperature, top_p,
// stream, text.format (text; json_object and json_schema as response_format),
// reasoning.effort as reasoning_effort ("none": no thinking).
// metadata, user, store, service_tier, safety_identifier, prompt_cache_key,
// prompt_cache_retention, stream_options, reasoning.summary and
// text.verbosity "medium" do not change the result and are not passed on.
// Throws api_error 400 naming the field for any other field or value
// (previous_response_id and conversation: nothing is stored; background
// true; include other than "reasoning.encrypted_content"; tools of other
// types; images, files, audio; item_reference), code unsupported_parameter
// where the field is known but not implemented; parse_json_body's bounds apply.
responses_request parse_responses_request(std::string_view body, const request_limits & limits);

// One output item: its type ("reasoning", "message" or "function_call"),
// its id (rs_, msg_, fc_ and 24 random letters and digits), and its text
// (reasoning: the thinking; message: the output_text; function_call: the
// arguments' JSON text).
struct responses_item {
    std::string type;
    std::string id;
    std::string text;
    std::string name;    // function_call: the function
    std::string call_id; // function_call: the call's id, which its function_call_output names
};

// The items of a whole answer: a reasoning item when it has reasoning, a
// message when it has content or nothing else, a function_call per call
// (its call_id the call's id, a new call_ id when it has none).
std::vector<responses_item> responses_items_of(const parsed_answer & a);

// The output tokens that belong to the reasoning: those up to the one that
// completes `reasoning_end` in the text of `pieces` (each output token's
// text, in order), every one when it never does; 0 when `a` has no
// reasoning or the template has no end marker ("").
size_t responses_reasoning_tokens(const parsed_answer & a, const std::vector<std::string> & pieces, const std::string & reasoning_end);

// A finished request's response object: {id, object "response",
// created_at, completed_at, status ("completed"; "incomplete" with
// incomplete_details.reason "max_output_tokens" when the budget or the
// context ended it), error null, model, output (the items, the last one
// "incomplete" when the response is), usage {input_tokens,
// input_tokens_details.cached_tokens, output_tokens,
// output_tokens_details.reasoning_tokens (`n_reasoning`), total_tokens},
// specdec (stats_body)} and `echo`'s fields.
nlohmann::json responses_body(const response_info & info, const nlohmann::json & echo, bool encrypted_reasoning,
                              const finished_request & f, const std::vector<responses_item> & items, size_t n_reasoning);

// What a streamed response has sent so far: the chat deltas (answer_delta's
// state), its items (the last is the open one while `open`), and its events' count.
struct responses_stream {
    answer_stream               sent;
    std::vector<responses_item> items;
    bool                        open = false;
    int64_t                     sequence = 0; // the next event's sequence_number
    nlohmann::json              echo = nlohmann::json::object(); // the request's (responses_request::echo)
    bool                        encrypted_reasoning = false;
};

// The stream's first events: response.created and response.in_progress, the
// response in_progress with no output and usage null.
std::string responses_stream_start(responses_stream & s, const response_info & info);

// The events of what `a` (the answer read so far; `partial`: more may come)
// adds to what `s` sent, from answer_delta: the open item is done when
// another kind begins (its text's done event, content_part.done,
// output_item.done), then the new one added (output_item.added, and
// content_part.added for reasoning_text and output_text parts), and its
// delta sent (reasoning_text.delta, output_text.delta,
// function_call_arguments.delta). "" when nothing is new.
std::string responses_stream_events(responses_stream & s, const parsed_answer & a, bool partial);

// The stream's end: the open item done, then response.completed, or
// response.incomplete, with the whole response (responses_body of the items sent).
std::string responses_stream_end(responses_stream & s, const response_info & info, const finished_request & f, size_t n_reasoning);

// A stream that failed once begun (the engine's error, a shutdown): an
// `error` event {code, message, param} and response.failed, the response
// with status "failed" and error {code "server_error", message}.
std::string responses_stream_failure(responses_stream & s, const response_info & info, const api_error & e);

} // namespace cli::serve
