// `specdec serve`, the OpenAI wire format: request bodies parsed and
// validated into plain structs, responses and stream chunks built from the
// engine's results. Pure functions (no model, no engine, no sockets), so the
// unit tier checks them.
#pragma once

#include "serve-chat.h"

#include "specdec/specdec.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cli::serve {

// A failure with its HTTP status and OpenAI's error fields; what() is the message.
class api_error : public std::runtime_error {
public:
    api_error(int status, std::string type, const std::string & message, std::string param = "", std::string code = "");

    int                 status() const noexcept { return status_; }
    const std::string & type() const noexcept { return type_; }
    const std::string & param() const noexcept { return param_; } // "" is written as null
    const std::string & code() const noexcept { return code_; }   // "" is written as null

private:
    int         status_;
    std::string type_;
    std::string param_;
    std::string code_;
};

// 400 invalid_request_error naming the offending field.
api_error invalid_request(const std::string & message, const std::string & param = "", const std::string & code = "invalid_value");

// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
nlohmann::json error_body(const api_error & e);

enum class endpoint {
    completions, // POST /v1/completions: `prompt`
    chat,        // POST /v1/chat/completions: `messages`
};

// What the server accepts of a request, before the prompt is tokenized.
struct request_limits {
    std::string model_id;          // the served model
    std::vector<std::string> model_aliases; // its names (--alias), model_id among them; empty: model_id alone
    bool        strict_model = false; // `model` must then be absent, empty or one of its names (else 404); by default any name is served, as llama-server does
    int32_t     n_ctx = 0;         // positions per sequence: max_tokens above it is refused
    uint32_t    n_slots = 1;       // requests that run side by side: `n` above it is refused
    size_t      max_prompts = 64;  // completions: prompts in one request at most
    size_t      max_stop = 16;     // stop strings at most
    // Bytes of one stop string, and of all of them: the engine thread checks
    // every stop string against each new token's text, for every request.
    size_t      max_stop_bytes = 256;
    size_t      max_stop_total_bytes = 1024;
    // A body's JSON, refused while it is parsed: arrays and objects within
    // each other (the body itself is level 1), values of any kind, and
    // arrays and objects (each costs an allocation: 8 MiB of `{}` would
    // otherwise take 330 MB). The parser does not recurse; code that prints
    // or converts a value does, once per level.
    size_t      max_json_depth = 128;
    size_t      max_json_values = size_t(1) << 20;
    size_t      max_json_containers = size_t(1) << 16;
};

// A request body's JSON, refused while it is parsed past the limits' depth,
// values or containers (api_error 400 json_too_deep / json_too_large,
// naming the top-level field where the bound was passed), or when it is not
// JSON (400 invalid_json). Every route parses its body with it.
nlohmann::json parse_json_body(std::string_view body, const request_limits & limits);

// The deepest nesting of arrays and objects in JSON text (0 for a scalar),
// counted without parsing or recursion; strings are skipped. For JSON that
// a request carries inside a string (a tool call's arguments), which
// llama.cpp's chat code parses and prints.
size_t json_text_depth(std::string_view text);

// A validated request. Defaults are OpenAI's where it has one.
struct parsed_request {
    endpoint                  kind = endpoint::completions;
    // Completions: its prompts, one or more (`prompt` a list of texts or of
    // token lists: a choice per prompt, times n). A prompt that holds token
    // ids (llama-server's shapes: [ids], [[ids]], or text and ids mixed,
    // [12, "text", 34]) has its parts in order, a token id or a text (token -1).
    // llama-server's prompt object {"prompt_string": text or ids and texts,
    // "multimodal_data": absent or empty} is read as its prompt_string.
    struct prompt_part {
        llama_token token = -1;
        std::string text;
    };
    struct completion_prompt {
        std::string              text;  // the prompt's text (with parts, theirs joined)
        std::vector<prompt_part> parts; // empty for a text prompt
    };
    std::vector<completion_prompt> prompts;
    uint32_t                  n = 1;             // choices per prompt, [1, limits.n_slots]
    std::vector<chat_message> messages;          // chat (at least one)
    bool                      stream = false;
    int32_t                   max_tokens = -1;   // -1: not given (completions: 16, chat: until the context is full)
    float                     temperature = 1.0f; // [0, 2]; below SPECDEC_MIN_SAMPLING_TEMPERATURE: greedy
    float                     top_p = 1.0f;      // (0, 1]
    int32_t                   top_k = 0;         // >= 0; 0: off (not OpenAI: llama-server's)
    float                     min_p = 0.0f;      // [0, 1) (not OpenAI: llama-server's)
    std::optional<uint32_t>   seed;              // absent: a random one per request
    // specdec's `speculative_accept` ("exact" | "rejection"; see
    // specdec_accept_mode); absent: the server's --accept.
    std::optional<specdec_accept_mode> accept;
    std::vector<std::string>  stop;              // non-empty strings
    std::string               model;             // as given ("" when absent)
    // Log-probabilities: -1 none; else alternatives per token (completions:
    // `logprobs` 0..5; chat: `logprobs: true` and `top_logprobs` 0..20).
    int32_t                   n_top_logprobs = -1;
    bool                      include_usage = false; // stream_options.include_usage: a last chunk with usage
    // Logit shaping (specdec_generate_params): logit_bias, presence_penalty
    // and frequency_penalty ([-2, 2]); llama-server's repeat_penalty and
    // repeat_last_n. logit_bias in OpenAI's form ({"token id": bias}) or
    // llama-server's (a key that is not a token id is a text; or a list of
    // [token id or text, bias] pairs); a bias is within [-100, 100], or
    // false: -infinity, never chosen. A text's bias applies to each of its
    // tokens (tokenized without special tokens): parse_request leaves the
    // texts in logit_bias_text, which resolve_logit_bias turns into entries
    // of logit_bias once the vocabulary is at hand; the ids are logit_bias's.
    struct bias_text {
        std::string text;
        float       bias = 0.0f;
        size_t      at = 0; // its place in the request's order: before logit_bias[at]
    };
    std::vector<specdec_logit_bias> logit_bias;
    std::vector<bias_text>          logit_bias_text;
    float                     presence_penalty = 0.0f;
    float                     frequency_penalty = 0.0f;
    float                     repeat_penalty = 1.0f;
    int32_t                   repeat_last_n = 64;
    // Structured output: a GBNF grammar (llama-server's `grammar`), or a JSON
    // schema to turn into one (response_format json_object: any object;
    // json_schema: its `schema`; llama-server's top-level `json_schema`).
    std::string               grammar;
    std::optional<std::string> json_schema;   // the schema's JSON text
    std::string               json_schema_field; // the field it came in: "response_format" or "json_schema"
    bool                      echo = false;   // completions: the prompt comes first in the text (and logprobs)
    // llama-server's `verbose`: the answer carries `__verbose`, the native
    // answer of its first choice (the prompt's text among it); absent: the server's (-vv).
    std::optional<bool>       verbose;
    bool                      ignore_eos = false; // llama-server's: end-of-generation tokens are never chosen (resolve_logit_bias)
    // Chat: the functions the model may call, and how (tools, tool_choice,
    // parallel_tool_calls). Their calls' grammar comes from the chat
    // template, not the client: set into `grammar`, lazy from the first
    // match of one of grammar_triggers (C strings borrowed from the chat
    // prompt, which must outlive the engine's parameters), else reading
    // grammar_prefix first.
    chat_tools                tools;
    // Chat, thinking models (llama-server's fields): `reasoning_format`
    // (absent: the server's), `chat_template_kwargs` (name -> JSON text of
    // the value), and whether the template is asked to think: the kwarg
    // enable_thinking, or `reasoning_effort` "none" (absent: the server's).
    std::optional<reasoning_format>    reasoning;
    std::map<std::string, std::string> template_kwargs;
    std::optional<bool>                enable_thinking;
    // `reasoning_budget_tokens` (or `thinking_budget_tokens`; -1: no limit)
    // and `reasoning_budget_message`; absent: the server's.
    std::optional<int32_t>             reasoning_budget;
    std::optional<std::string>         reasoning_budget_message;
    // Chat: `add_generation_prompt` (absent: true) and
    // `continue_final_message` (true, "reasoning_content" or "content";
    // absent: the server's --prefill-assistant decides for a conversation
    // that ends with an assistant message). chat_options_for resolves them.
    std::optional<bool>                add_generation_prompt;
    std::optional<continuation>        continue_final;
    // The reasoning block the engine tracks (its markers and the text before
    // the output), set from the chat template once the request is templated.
    std::string                        reasoning_start;
    std::string                        reasoning_end;
    std::string                        reasoning_prefix;
    std::vector<const char *> grammar_triggers;
    std::string               grammar_prefix;
};

// Parses a request body. Throws api_error: 400 (malformed JSON, JSON over
// the limits' depth, values or containers: code json_too_deep /
// json_too_large, naming the top-level field; not an object, a field of the wrong type or out of its range, no prompt
// or messages, n above the limits' slots, more prompts than max_prompts, a stop string over the limits, a field this server does not
// implement with a value other than its default: code unsupported_parameter),
// 404 model_not_found (`model` names another model, with limits.strict_model). Unknown fields are
// ignored.
parsed_request parse_request(endpoint kind, std::string_view body, const request_limits & limits);

// Turns r.logit_bias_text into entries of r.logit_bias, in the request's
// order: each text's tokens (`tokenize`, which may throw) with its bias.
// Then, with r.ignore_eos, a bias of -infinity on each of `eog` (the
// vocabulary's end-of-generation tokens), as llama-server applies
// ignore_eos: they are never chosen.
void resolve_logit_bias(parsed_request & r, const std::function<std::vector<llama_token>(const std::string &)> & tokenize,
                        const std::vector<llama_token> & eog);

// The reasoning format a name spells, with llama-server's names ("none",
// "auto", "deepseek", "deepseek-legacy"); nullopt for any other.
std::optional<reasoning_format> reasoning_format_from_name(const std::string & name);
const char * reasoning_format_name(reasoning_format f);

// The chat options of a request over the server's (`server`): its
// reasoning format, its template kwargs over the server's (name by name),
// and enable_thinking from its own, else the server's kwarg, else the
// server's default. `stream` as the request's. Whether the last message is
// continued, as llama-server decides it: continue_final_message when given;
// else, with the server's prefill_assistant, a conversation that ends with
// an assistant message continues it. Throws api_error 400 for
// add_generation_prompt true with a continuation, a continuation of a
// message that is not the assistant's or that calls tools, and two
// assistant messages at the end of a conversation that would be continued.
chat_options chat_options_for(const parsed_request & r, const chat_options & server);

// The engine's parameters for a request (stop strings, logit biases and the
// grammar point into `r`, which must outlive the returned value's use; the
// caller turns r.json_schema into r.grammar first). `seed` is used when r.seed is absent,
// `accept` when r.accept is; `n_draft` is the server's (SPECDEC_N_DRAFT_AUTO, a length, 0 for plain).
specdec::request_params to_engine_params(const parsed_request & r, int32_t n_ctx, uint32_t seed, int32_t n_draft,
                                         specdec_accept_mode accept);

// OpenAI's finish_reason: "stop" (end of generation, a stop string), "length"
// (max_tokens, the context), nullptr for the others (cancelled, error).
const char * finish_reason(specdec_stop_reason stop);

// Identity of one response, the same in every chunk of a stream, and what
// it carries besides the text.
struct response_info {
    endpoint    kind = endpoint::completions;
    std::string id;          // "cmpl-N" / "chatcmpl-N"
    uint32_t    index = 0;   // the choice's: prompt index x n + the choice's number among its prompt's
    int64_t     created = 0; // seconds since the epoch
    std::string model;
    std::string strategy;    // the server's drafter ("none": plain decoding)
    std::string accept = "exact"; // accept_mode_name(accept_ran()) of the request (serve-scheduler.h)
    int32_t     n_top_logprobs = -1; // as parsed_request's
    bool        include_usage = false;
    std::function<std::string(llama_token)> piece; // a token's text (bytes), for log-probabilities
    // echo: the prompt's text and tokens (borrowed), which the text and the
    // log-probabilities begin with; null text: no echo.
    const std::string *              echo_text = nullptr;
    const std::vector<llama_token> * echo_tokens = nullptr;
    // Chat with tools: the answer read in the model's format (borrowed),
    // whose content and tool_calls the message carries, and whose calls
    // make finish_reason "tool_calls"; null: the text is the content.
    const parsed_answer *            answer = nullptr;
};

// Log-probabilities of consecutive output tokens, as the engine reports them.
struct token_logprobs {
    std::vector<llama_token>           tokens;
    std::vector<float>                 logprobs; // one per token
    std::vector<specdec_token_logprob> top;      // info.n_top_logprobs per token

    // Every token of a finished request's output.
    static token_logprobs of(const specdec::sequence_result & out);
};

// A choice's `logprobs` for these tokens. Chat: {"content": [{token,
// logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}. Completions
// (the legacy shape): {tokens, token_logprobs, top_logprobs: [{text:
// logprob}], text_offset}, offsets counted on from `text_offset`, which is
// advanced past the tokens' text.
nlohmann::json logprobs_body(const response_info & info, const token_logprobs & lp, size_t & text_offset);

// A finished request as the engine hands it out, plus its prompt length.
struct finished_request {
    const specdec::request_result * result = nullptr; // borrowed for the call
    size_t                          n_prompt = 0;
};

// The per-request statistics object ("specdec"): tokens, steps, drafted,
// accepted, acceptance by position, drafts by position, times in ms.
nlohmann::json stats_body(const response_info & info, const finished_request & f);

// The whole non-streaming response of one choice (choices[0].text or .message, usage, specdec).
nlohmann::json response_body(const response_info & info, const finished_request & f);

// The usage of a response's choices: their completion tokens summed, each
// prompt's tokens counted once (`n` choices per prompt, consecutive).
nlohmann::json usage_body(const std::vector<finished_request> & fs, size_t n);

// The non-streaming response of several choices (n > 1, several prompts):
// one per finished request, infos[i] its identity (index i), usage over all
// of them, and "specdec" a list of each choice's statistics.
nlohmann::json response_body(const std::vector<response_info> & infos, const std::vector<finished_request> & fs, size_t n);

// With echo, the legacy `logprobs` of the prompt: its tokens, null then each
// later token's log-probability (from `out`'s prompt_logprobs), null then
// their alternatives, offsets from 0 (`text_offset` is set past them).
nlohmann::json echo_logprobs_body(const response_info & info, const specdec::sequence_result & out, size_t & text_offset);

// A chat stream's first chunk, as llama-server and OpenAI send it: the delta
// {role "assistant", content null}, before any content.
nlohmann::json role_chunk_body(const response_info & info);

// One stream chunk carrying `piece` and `logprobs` (logprobs_body of its
// tokens; null: none).
nlohmann::json chunk_body(const response_info & info, std::string_view piece, const nlohmann::json & logprobs = nullptr);

// A new tool call's id: "call_" and 24 random letters and digits.
std::string new_tool_call_id();

// Gives every call of `a` that has no id (the model's format carries none) a new one.
void name_tool_calls(parsed_answer & a);

// What a streamed chat answer with tools has sent so far.
struct answer_stream {
    struct call {
        std::string id;
        size_t      arguments_sent = 0; // bytes of its arguments
    };
    std::string       reasoning_sent;
    std::string       content_sent;
    std::vector<call> calls; // each call whose first delta was sent
};

// The chat delta of what `a` (the answer read so far; `partial`: more text
// may come) adds to what `s` says was sent, as OpenAI streams it: `content`
// past what was sent; `tool_calls` entries, a call's first one {index, id,
// type "function", function: {name, arguments}} once its name is whole (its
// arguments began, a later call began, or the answer is complete), then
// {index, function: {arguments}} with each further fragment;
// `reasoning_content` past what was sent, as llama-server streams it. An empty object
// when nothing is new. Text that revises what was sent is not sent.
nlohmann::json answer_delta(answer_stream & s, const parsed_answer & a, bool partial);

// A chat stream chunk carrying `delta` and `logprobs` (null: none).
nlohmann::json delta_chunk_body(const response_info & info, nlohmann::json delta, const nlohmann::json & logprobs = nullptr);

// The last chunk of a choice: empty text or delta, finish_reason and specdec.
nlohmann::json final_chunk_body(const response_info & info, const finished_request & f);

// With stream_options.include_usage, the chunk after the choices' last ones:
// no choices, the usage of all (see usage_body).
nlohmann::json usage_chunk_body(const response_info & info, const std::vector<finished_request> & fs, size_t n);

// One server-sent event: "data: <json on one line>\n\n" (invalid UTF-8 replaced).
std::string sse_event(const nlohmann::json & j);

// One server-sent event with its name, for the streams whose events are
// typed (Anthropic's, the Responses API's): "event: NAME\ndata: <json on
// one line>\n\n", NAME being j["type"] (a string; else nlohmann's type_error).
std::string typed_sse_event(const nlohmann::json & j);

// The stream's terminator: "data: [DONE]\n\n".
std::string_view sse_done();

} // namespace cli::serve
