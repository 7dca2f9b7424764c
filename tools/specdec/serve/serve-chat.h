// `specdec serve`, chat messages -> prompt text through the model's own chat
// template (its GGUF `tokenizer.chat_template`), rendered by llama.cpp's
// template engine (common/chat.h of the pinned tree). A model without a
// template gets llama.cpp's fallback, ChatML, as llama-server does.
// With tools, llama.cpp's chat code also gives the grammar a tool call must
// follow in the model's own format, and reads the calls back out of the text.
// Kept apart from the JSON layer: it is the only file that sees llama.cpp's common library.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct llama_model;

namespace cli::serve {

// One function call, in a message or an answer.
struct tool_call {
    std::string id;        // "" when the model's format carries none (the server names it)
    std::string name;
    std::string arguments; // JSON text of the arguments object
};

struct chat_message {
    std::string            role;    // system, developer, user, assistant or tool
    std::string            content; // text (text parts joined by a newline)
    // The text parts as given, when content came as an array (empty for a
    // string): llama.cpp renders them as the template takes content, and a
    // continued message (continue_final_message) joins them by a blank line, as llama-server.
    std::vector<std::string> content_parts;
    std::string            reasoning_content; // assistant: its thinking, which some templates show again
    std::vector<tool_call> tool_calls;   // assistant: the calls it made
    std::string            tool_call_id; // tool: the call this answers
    std::string            name;         // tool: the function that answered ("" when not given)
};

// A function the model may call.
struct tool_function {
    std::string name;
    std::string description;
    std::string parameters; // JSON text of its parameters' JSON schema ("" or {}: no arguments)
};

enum class tool_choice {
    none,      // the tools are shown, never called
    automatic, // "auto": the model decides; a call, once its format's marker is written, must be well-formed
    required,  // the answer calls at least one function
};

struct chat_tools {
    std::vector<tool_function> functions; // empty: a chat without tools
    tool_choice                choice = tool_choice::automatic;
    std::string                forced;    // with required: the one function the answer calls ("" any)
    std::optional<bool>        parallel;  // several calls in one answer; absent: when the template shows several
};

// How a thinking model's reasoning reaches the client, with llama-server's
// names: none (left in the content), auto and deepseek (apart, as
// reasoning_content, also in stream deltas), deepseek-legacy (apart, and
// left in the content too while streaming).
enum class reasoning_format { none, automatic, deepseek, deepseek_legacy };

// Whether the answer continues the conversation's last message (llama.cpp's
// continue_final_message): none opens a new assistant turn; automatic
// continues its reasoning when it holds only reasoning, else its content;
// reasoning and content say which.
enum class continuation { none, automatic, reasoning, content };

// What a chat request asks of the template and the reading of its answer,
// besides its messages and tools.
struct chat_options {
    // Whether the prompt ends with the assistant's turn opened (false: the
    // template's text for the messages alone), and whether the last message
    // is continued instead (then add_generation_prompt is false; the answer
    // holds the continuation only, not the text it continues).
    bool             add_generation_prompt = true;
    continuation     continue_final = continuation::none;
    reasoning_format reasoning = reasoning_format::automatic;
    bool             enable_thinking = true; // false: the template is asked to open no reasoning
    // Extra template variables: name -> JSON text of the value (enable_thinking among them when given).
    std::map<std::string, std::string> template_kwargs;
    bool             stream = false;         // deepseek-legacy keeps reasoning in streamed content
    // A reasoning budget (llama-server's --reasoning-budget): tokens an
    // answer may think before its end marker is forced (-1: no limit), and
    // the text forced before the marker.
    int32_t          reasoning_budget = -1;
    std::string      reasoning_budget_message;
    // The server's: a conversation that ends with an assistant message
    // continues it unless a request says otherwise (llama-server's
    // --prefill-assistant, on by default).
    bool             prefill_assistant = true;
};

// An answer's text read as the model's format says: its reasoning, content and calls.
struct parsed_answer {
    std::string            content;
    std::vector<tool_call> tool_calls;
    std::string            reasoning_content;
};

// Reads answers in the format of the chat prompt it came with.
class chat_parser {
public:
    struct impl;
    explicit chat_parser(std::unique_ptr<impl> state);
    ~chat_parser();
    chat_parser(const chat_parser &) = delete;
    chat_parser & operator=(const chat_parser &) = delete;

    // `partial`: more text may follow (a call may be cut short; its
    // arguments are then the text so far). Never throws: text the format
    // does not read is content (a partial text that reads as nothing yet:
    // nullopt, so a stream waits for more).
    std::optional<parsed_answer> parse(const std::string & text, bool partial) const;

private:
    std::unique_ptr<impl> impl_;
};

// What the model is given, and what its answer must follow.
struct chat_prompt {
    std::string prompt;
    // The tool-call grammar (GBNF; "" none), lazy when it has triggers
    // (regular expressions, as specdec_generate_params.grammar_triggers);
    // else it reads grammar_prefix (the template's generation prompt) first.
    std::string              grammar;
    std::vector<std::string> grammar_triggers;
    std::string              grammar_prefix;
    std::vector<std::string> stops;  // stop strings the format adds
    // The template's reasoning markers (both "" when it has none) and its
    // generation prompt, which may open a block.
    std::string              reasoning_start;
    std::string              reasoning_end;
    std::string              generation_prompt;
    std::shared_ptr<const chat_parser> parser; // null: the answer's text is its content
};

class chat_formatter {
public:
    // Reads the template from `model` (borrowed; must outlive this), or uses
    // `override_template` when it is not empty: Jinja text, or the name of
    // one of llama.cpp's built-in templates (llama_chat_builtin_templates:
    // llama3, command-r, ...; "chatml" is llama.cpp's Jinja ChatML), rendered
    // by llama.cpp's own code, messages only (no tools, no reasoning
    // parser), as llama-server renders a name under --no-jinja. Throws
    // std::runtime_error when llama.cpp cannot parse it.
    explicit chat_formatter(const llama_model * model, const std::string & override_template = "");
    ~chat_formatter();
    chat_formatter(const chat_formatter &) = delete;
    chat_formatter & operator=(const chat_formatter &) = delete;

    // Whether the model carries a template (false: the ChatML fallback is used).
    bool from_model() const;
    // Whether its template writes tool calls (in a format llama.cpp reads or not).
    bool writes_tool_calls() const;
    // The template's text (the model's, or the ChatML fallback).
    std::string source() const;
    // The prompt for `messages`, ending with the assistant's turn opened
    // (options.add_generation_prompt) or inside the last message
    // (options.continue_final);
    // with tools (and a choice other than none), the grammar and parser of
    // its tool calls; where the template thinks and options.reasoning is
    // not none, a parser that takes the reasoning apart. Thread-safe.
    // Throws std::runtime_error when the template fails on them, or has no
    // tool-call format llama.cpp recognises while the tools may be called
    // (the HTTP layer answers 400).
    chat_prompt apply(const std::vector<chat_message> & messages, const chat_tools & tools = {},
                      const chat_options & options = {}) const;

private:
    chat_prompt apply_builtin(const std::vector<chat_message> & messages, const chat_tools & tools, const chat_options & options) const;

    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace cli::serve
