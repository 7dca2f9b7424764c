#include "serve-responses.h"

#include <algorithm>
#include <ctime>

namespace cli::serve {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json; // tools' parameters and the schema keep their keys' order into the template and grammar

// What this server writes before the reasoning in encrypted_content, and
// reads back: the text is not encrypted (nothing here is secret), only opaque to the client.
constexpr std::string_view encrypted_prefix = "specdec:";

api_error bad_field(const std::string & field, const std::string & message) {
    return invalid_request("'" + field + "' " + message, field);
}

api_error unsupported(const std::string & field, const std::string & message) {
    return invalid_request("'" + field + "' " + message, field, "unsupported_parameter");
}

const ojson * find(const ojson & o, const char * key) {
    const auto it = o.find(key);
    return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string string_at(const ojson & o, const char * key, const std::string & where) {
    const ojson * v = find(o, key);
    if (v == nullptr || !v->is_string()) {
        throw bad_field(where + "." + key, "must be a string");
    }
    return v->get<std::string>();
}

// A message's content: a string, or parts of text (input_text, output_text) joined with newlines.
std::string content_text(const ojson & content, const std::string & where) {
    if (content.is_string()) {
        return content.get<std::string>();
    }
    if (!content.is_array()) {
        throw bad_field(where, "must be a string or an array of content parts");
    }
    std::string out;
    for (size_t i = 0; i < content.size(); ++i) {
        const ojson & p = content[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        const ojson * type = p.is_object() ? find(p, "type") : nullptr;
        if (type == nullptr || !type->is_string()) {
            throw bad_field(at + ".type", "is required (a content part is an object with a type)");
        }
        if (*type != "input_text" && *type != "output_text") {
            throw unsupported(at + ".type", "is " + type->dump().substr(0, 64) + "; this server takes text only (input_text and output_text parts)");
        }
        if (i > 0) {
            out += '\n';
        }
        out += string_at(p, "text", at);
    }
    return out;
}

// A reasoning item's text: its content's reasoning_text, else its
// summary's text, else the encrypted_content this server wrote.
std::string reasoning_text(const ojson & item, const std::string & where) {
    std::string out;
    for (const char * key : {"content", "summary"}) {
        const ojson * parts = find(item, key);
        if (parts == nullptr) {
            continue;
        }
        if (!parts->is_array()) {
            throw bad_field(where + "." + key, "must be an array of text parts");
        }
        for (size_t i = 0; i < parts->size(); ++i) {
            const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
            if (!(*parts)[i].is_object()) {
                throw bad_field(at, "must be an object");
            }
            if (!out.empty()) {
                out += '\n';
            }
            out += string_at((*parts)[i], "text", at);
        }
        if (!out.empty()) {
            return out;
        }
    }
    if (const ojson * e = find(item, "encrypted_content")) {
        const std::string text = e->is_string() ? e->get<std::string>() : "";
        if (text.rfind(encrypted_prefix, 0) != 0) {
            throw unsupported(where + ".encrypted_content", "was not written by this server, which cannot read it");
        }
        out = text.substr(encrypted_prefix.size());
    }
    return out;
}

// The open assistant message at the end of `out` that an item of the assistant's turn may join, or null.
ojson * open_assistant(ojson & out) {
    return !out.empty() && out.back()["role"] == "assistant" ? &out.back() : nullptr;
}

// One input item as chat messages, appended to `out`.
void translate_item(const ojson & item, const std::string & where, const request_limits & limits, ojson & out) {
    if (!item.is_object()) {
        throw bad_field(where, "must be an object");
    }
    const ojson * t = find(item, "type");
    if (t != nullptr && !t->is_string()) {
        throw bad_field(where + ".type", "must be a string");
    }
    const std::string type = t != nullptr ? t->get<std::string>() : "message"; // an easy input message has none
    ojson * assistant = open_assistant(out);
    if (type == "message") {
        const std::string role = string_at(item, "role", where);
        if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
            throw bad_field(where + ".role", "must be \"user\", \"assistant\", \"system\" or \"developer\"");
        }
        const ojson * content = find(item, "content");
        if (content == nullptr) {
            throw bad_field(where + ".content", "is required");
        }
        std::string text = content_text(*content, where + ".content");
        // An assistant's text joins its turn's reasoning; after its text or calls it begins another turn.
        if (role == "assistant" && assistant != nullptr && (*assistant)["content"] == "" && !assistant->contains("tool_calls")) {
            (*assistant)["content"] = std::move(text);
        } else {
            out.push_back({{"role", role}, {"content", std::move(text)}});
        }
    } else if (type == "reasoning") {
        std::string text = reasoning_text(item, where);
        if (assistant != nullptr && (*assistant)["content"] == "" && !assistant->contains("tool_calls") &&
            !assistant->contains("reasoning_content")) {
            (*assistant)["reasoning_content"] = std::move(text);
        } else {
            out.push_back({{"role", "assistant"}, {"content", ""}, {"reasoning_content", std::move(text)}});
        }
    } else if (type == "function_call") {
        std::string arguments = string_at(item, "arguments", where);
        if (json_text_depth(arguments) > limits.max_json_depth) {
            throw invalid_request("'" + where + ".arguments' nests arrays and objects deeper than " + std::to_string(limits.max_json_depth) +
                                      " levels",
                                  where + ".arguments", "json_too_deep");
        }
        ojson call = {{"id", string_at(item, "call_id", where)},
                      {"type", "function"},
                      {"function", {{"name", string_at(item, "name", where)}, {"arguments", std::move(arguments)}}}};
        if (assistant == nullptr) {
            out.push_back({{"role", "assistant"}, {"content", ""}});
            assistant = &out.back();
        }
        (*assistant)["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
        const ojson * output = find(item, "output");
        if (output == nullptr) {
            throw bad_field(where + ".output", "is required");
        }
        out.push_back({{"role", "tool"}, {"tool_call_id", string_at(item, "call_id", where)}, {"content", content_text(*output, where + ".output")}});
    } else {
        throw unsupported(where + ".type", "is " + t->dump().substr(0, 64) +
                                               "; this server takes message, function_call, function_call_output and reasoning items "
                                               "(it stores nothing an item_reference could name, and runs no built-in tools)");
    }
}

ojson translate_tools(const ojson & tools) {
    if (!tools.is_array()) {
        throw bad_field("tools", "must be an array");
    }
    ojson out = ojson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const ojson & t = tools[i];
        const std::string at = "tools[" + std::to_string(i) + "]";
        if (!t.is_object()) {
            throw bad_field(at, "must be an object");
        }
        const ojson * type = find(t, "type");
        if (type == nullptr || *type != "function") {
            throw unsupported(at + ".type", "must be \"function\": this server runs no built-in, MCP or custom tools");
        }
        for (const auto & [key, value] : t.items()) {
            if (key != "type" && key != "name" && key != "description" && key != "parameters" && key != "strict" && !value.is_null()) {
                throw unsupported(at + "." + key, "is not supported by this server (a tool is {type, name, description, parameters, strict})");
            }
        }
        if (const ojson * strict = find(t, "strict"); strict != nullptr && !strict->is_boolean()) {
            throw bad_field(at + ".strict", "must be a boolean");
        }
        ojson fn = {{"name", string_at(t, "name", at)}}; // strict or not, the call's grammar follows its parameters
        if (const ojson * d = find(t, "description")) {
            fn["description"] = *d;
        }
        if (const ojson * p = find(t, "parameters")) {
            fn["parameters"] = *p;
        }
        out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
}

ojson translate_tool_choice(const ojson & c) {
    if (c == "auto" || c == "none" || c == "required") {
        return c;
    }
    const ojson * type = c.is_object() ? find(c, "type") : nullptr;
    if (type == nullptr || *type != "function") {
        throw unsupported("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}");
    }
    return {{"type", "function"}, {"function", {{"name", string_at(c, "name", "tool_choice")}}}};
}

// text.format into response_format.
void translate_text(const ojson & text, ojson & chat) {
    if (!text.is_object()) {
        throw bad_field("text", "must be an object {\"format\": ...}");
    }
    for (const auto & [key, value] : text.items()) {
        if (key != "format" && key != "verbosity" && !value.is_null()) {
            throw unsupported("text." + key, "is not supported by this server");
        }
    }
    if (const ojson * v = find(text, "verbosity"); v != nullptr && *v != "medium") {
        throw unsupported("text.verbosity", "is not supported by this server beyond \"medium\" (what the model writes is its own)");
    }
    const ojson * format = find(text, "format");
    if (format == nullptr) {
        return;
    }
    const ojson * type = format->is_object() ? find(*format, "type") : nullptr;
    if (type == nullptr || (*type != "text" && *type != "json_object" && *type != "json_schema")) {
        throw bad_field("text.format", "must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
    }
    if (*type == "json_schema") {
        const ojson * schema = find(*format, "schema");
        if (schema == nullptr || !schema->is_object()) {
            throw bad_field("text.format.schema", "must be an object (a JSON schema) with type json_schema");
        }
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", format->value("name", "")}, {"schema", *schema}}}};
    } else {
        chat["response_format"] = {{"type", *type}};
    }
}

void translate_reasoning(const ojson & r, ojson & chat) {
    if (!r.is_object()) {
        throw bad_field("reasoning", "must be an object {\"effort\": ...}");
    }
    for (const auto & [key, value] : r.items()) {
        if (key != "effort" && key != "summary" && key != "generate_summary" && !value.is_null()) {
            throw unsupported("reasoning." + key, "is not supported by this server");
        }
    }
    for (const char * key : {"summary", "generate_summary"}) {
        if (const ojson * s = find(r, key); s != nullptr && *s != "auto" && *s != "concise" && *s != "detailed") {
            throw bad_field(std::string("reasoning.") + key, "must be \"auto\", \"concise\" or \"detailed\"");
        }
    }
    if (const ojson * effort = find(r, "effort")) {
        if (!effort->is_string()) {
            throw bad_field("reasoning.effort", "must be a string");
        }
        chat["reasoning_effort"] = *effort;
    }
}

bool is_false(const ojson & v) { return v.is_boolean() && !v.get<bool>(); }
bool is_zero(const ojson & v) { return v.is_number() && v.get<double>() == 0.0; }
bool is_empty(const ojson & v) { return (v.is_array() || v.is_object()) && v.empty(); }
bool is_disabled(const ojson & v) { return v == "disabled"; }
bool is_never(const ojson &) { return false; }

// The fields this server reads; each is passed on, repeated, accepted or
// refused below. A field not listed is refused.
struct responses_field {
    const char * name;
    const char * note;                  // refused: what its 400 adds (the value it may have, or why none)
    bool (*is_default)(const ojson &);  // null: taken whatever its value; else refused unless it holds
};

constexpr responses_field responses_fields[] = {
    // Translated into the chat request.
    {"model", nullptr, nullptr},
    {"input", nullptr, nullptr},
    {"instructions", nullptr, nullptr},
    {"tools", nullptr, nullptr},
    {"tool_choice", nullptr, nullptr},
    {"parallel_tool_calls", nullptr, nullptr},
    {"max_output_tokens", nullptr, nullptr},
    {"temperature", nullptr, nullptr},
    {"top_p", nullptr, nullptr},
    {"text", nullptr, nullptr},
    {"reasoning", nullptr, nullptr},
    {"stream", nullptr, nullptr},
    {"include", nullptr, nullptr},
    // What changes no token of the answer.
    {"metadata", nullptr, nullptr},
    {"user", nullptr, nullptr},
    {"store", nullptr, nullptr},
    {"service_tier", nullptr, nullptr},
    {"safety_identifier", nullptr, nullptr},
    {"prompt_cache_key", nullptr, nullptr},
    {"prompt_cache_retention", nullptr, nullptr},
    {"stream_options", nullptr, nullptr},
    // Not implemented: refused unless they ask for nothing.
    {"background", "; omit it or send false (the answer is given while the request waits)", is_false},
    {"top_logprobs", "; omit it or send 0", is_zero},
    {"truncation", "; omit it or send \"disabled\"", is_disabled},
    {"context_management", "; omit it or send []", is_empty},
    {"max_tool_calls", "", is_never},
    {"prompt", " (reusable prompts are stored ones)", is_never},
    {"moderation", "", is_never},
    {"previous_response_id", " (this server stores no responses: send the whole conversation in 'input')", is_never},
    {"conversation", " (this server stores no conversations: send the whole conversation in 'input')", is_never},
};

// The values of `include` this server implements.
bool implemented_include(const ojson & v) {
    return v == "reasoning.encrypted_content";
}

// The body's JSON, keys in the order sent: parse_json_body's bounds and 400s first.
ojson parse_body(std::string_view body, const request_limits & limits) {
    parse_json_body(body, limits);
    ojson j = ojson::parse(body.begin(), body.end());
    if (!j.is_object()) {
        throw invalid_request("the body must be a JSON object", "", "invalid_json");
    }
    return j;
}

// The chat body a Responses body `j` means (parse_responses_request).
ojson translate(const ojson & j, const request_limits & limits) {
    for (const auto & [key, value] : j.items()) {
        const auto f = std::find_if(std::begin(responses_fields), std::end(responses_fields),
                                    [&key = key](const responses_field & r) { return key == r.name; });
        if (value.is_null() || (f != std::end(responses_fields) && (f->is_default == nullptr || f->is_default(value)))) {
            continue;
        }
        const char * note = f == std::end(responses_fields) ? "" : f->note;
        throw invalid_request("'" + key + "' is not supported by this server, and ignoring it would change the result" + note, key,
                              "unsupported_parameter");
    }
    ojson chat = ojson::object();
    for (const char * key : {"model", "stream", "temperature", "top_p", "parallel_tool_calls"}) {
        if (const ojson * v = find(j, key)) {
            chat[key] = *v;
        }
    }
    if (const ojson * n = find(j, "max_output_tokens")) {
        if (!n->is_number_integer() || n->get<int64_t>() < 1) {
            throw bad_field("max_output_tokens", "must be an integer of at least 1");
        }
        chat["max_tokens"] = *n;
    }
    if (const ojson * include = find(j, "include")) {
        if (!include->is_array()) {
            throw bad_field("include", "must be an array");
        }
        for (size_t i = 0; i < include->size(); ++i) {
            if (!implemented_include((*include)[i])) {
                throw unsupported("include[" + std::to_string(i) + "]", "is not supported by this server (it gives \"reasoning.encrypted_content\")");
            }
        }
    }
    ojson messages = ojson::array();
    if (const ojson * instructions = find(j, "instructions")) {
        if (!instructions->is_string()) {
            throw bad_field("instructions", "must be a string");
        }
        messages.push_back({{"role", "system"}, {"content", *instructions}});
    }
    const ojson * input = find(j, "input");
    if (input == nullptr) {
        throw invalid_request("'input' is required", "input", "missing_field");
    }
    if (input->is_string()) {
        messages.push_back({{"role", "user"}, {"content", *input}});
    } else if (input->is_array()) {
        for (size_t i = 0; i < input->size(); ++i) {
            translate_item((*input)[i], "input[" + std::to_string(i) + "]", limits, messages);
        }
    } else {
        throw bad_field("input", "must be a string or an array of items");
    }
    chat["messages"] = std::move(messages);
    if (const ojson * tools = find(j, "tools")) {
        chat["tools"] = translate_tools(*tools);
    }
    if (const ojson * c = find(j, "tool_choice")) {
        chat["tool_choice"] = translate_tool_choice(*c);
    }
    if (const ojson * text = find(j, "text")) {
        translate_text(*text, chat);
    }
    if (const ojson * r = find(j, "reasoning")) {
        translate_reasoning(*r, chat);
    }
    return chat;
}

} // namespace

responses_request parse_responses_request(std::string_view body, const request_limits & limits) {
    const ojson j = parse_body(body, limits);
    responses_request out;
    out.chat = parse_request(endpoint::chat, translate(j, limits).dump(), limits);
    const auto given = [&j](const char * key, json fallback) {
        const ojson * v = find(j, key);
        return v == nullptr ? fallback : json(*v);
    };
    out.echo = {{"instructions", given("instructions", nullptr)},
                {"max_output_tokens", given("max_output_tokens", nullptr)},
                {"metadata", given("metadata", json::object())},
                {"parallel_tool_calls", given("parallel_tool_calls", true)},
                {"reasoning", given("reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
                {"store", false},
                {"temperature", given("temperature", 1.0)},
                {"text", given("text", {{"format", {{"type", "text"}}}})},
                {"tool_choice", given("tool_choice", "auto")},
                {"tools", given("tools", json::array())},
                {"top_p", given("top_p", 1.0)},
                {"truncation", "disabled"},
                {"user", given("user", nullptr)}};
    if (const ojson * include = find(j, "include")) {
        out.encrypted_reasoning = std::find(include->begin(), include->end(), "reasoning.encrypted_content") != include->end();
    }
    return out;
}

namespace {

std::string new_item_id(const char * prefix) {
    return prefix + new_tool_call_id().substr(5); // the same 24 random letters and digits after "call_"
}

const char * status_of(const finished_request & f) {
    const specdec_stop_reason why = f.result->output.stop;
    return why == SPECDEC_STOP_BUDGET || why == SPECDEC_STOP_CONTEXT ? "incomplete" : "completed";
}

// An item as the output list shows it, with its status.
json item_body(const responses_item & it, bool encrypted_reasoning, const char * status) {
    if (it.type == "reasoning") {
        json j = {{"type", "reasoning"},
                  {"id", it.id},
                  {"summary", json::array()},
                  {"content", json::array({{{"type", "reasoning_text"}, {"text", it.text}}})},
                  {"status", status}};
        if (encrypted_reasoning) {
            j["encrypted_content"] = std::string(encrypted_prefix) + it.text;
        }
        return j;
    }
    if (it.type == "message") {
        return {{"type", "message"},
                {"id", it.id},
                {"role", "assistant"},
                {"status", status},
                {"content",
                 json::array({{{"type", "output_text"}, {"text", it.text}, {"annotations", json::array()}, {"logprobs", json::array()}}})}};
    }
    return {{"type", "function_call"}, {"id", it.id}, {"call_id", it.call_id}, {"name", it.name}, {"arguments", it.text}, {"status", status}};
}

// The response object without its outcome (status in_progress, no output, usage null).
json response_head(const response_info & info, const json & echo) {
    json j = {{"id", info.id},
              {"object", "response"},
              {"created_at", info.created},
              {"status", "in_progress"},
              {"background", false},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"model", info.model},
              {"output", json::array()},
              {"previous_response_id", nullptr},
              {"usage", nullptr}};
    j.update(echo);
    return j;
}

std::string event(responses_stream & s, json j) {
    j["sequence_number"] = s.sequence++;
    return typed_sse_event(j);
}

// The open item's done events, the item with `status`.
std::string close_item(responses_stream & s, const char * status) {
    if (!s.open) {
        return "";
    }
    s.open = false;
    const size_t index = s.items.size() - 1;
    const responses_item & it = s.items.back();
    const json item = item_body(it, s.encrypted_reasoning, status);
    std::string out;
    if (it.type == "function_call") {
        out += event(s, {{"type", "response.function_call_arguments.done"},
                         {"item_id", it.id},
                         {"output_index", index},
                         {"name", it.name},
                         {"arguments", it.text}});
    } else {
        const bool reasoning = it.type == "reasoning";
        json done = {{"type", reasoning ? "response.reasoning_text.done" : "response.output_text.done"},
                     {"item_id", it.id},
                     {"output_index", index},
                     {"content_index", 0},
                     {"text", it.text}};
        if (!reasoning) {
            done["logprobs"] = json::array();
        }
        out += event(s, std::move(done));
        out += event(s, {{"type", "response.content_part.done"},
                         {"item_id", it.id},
                         {"output_index", index},
                         {"content_index", 0},
                         {"part", item["content"][0]}});
    }
    out += event(s, {{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
    return out;
}

// Done with the open item unless it is of `type` (a function_call always begins its own), then `it` added.
std::string open_item(responses_stream & s, responses_item it) {
    if (s.open && s.items.back().type == it.type && it.type != "function_call") {
        return "";
    }
    std::string out = close_item(s, "completed");
    s.items.push_back(std::move(it));
    s.open = true;
    const size_t index = s.items.size() - 1;
    const responses_item & added = s.items.back();
    json item = item_body(added, false, "in_progress"); // encrypted_content is written once the reasoning is whole
    if (added.type == "function_call") {
        return out + event(s, {{"type", "response.output_item.added"}, {"output_index", index}, {"item", std::move(item)}});
    }
    const json part = item["content"][0]; // its text empty
    item["content"] = json::array();
    out += event(s, {{"type", "response.output_item.added"}, {"output_index", index}, {"item", std::move(item)}});
    out += event(s, {{"type", "response.content_part.added"}, {"item_id", added.id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    return out;
}

std::string text_delta(responses_stream & s, const std::string & delta) {
    responses_item & it = s.items.back();
    it.text += delta;
    const bool reasoning = it.type == "reasoning";
    json j = {{"type", reasoning ? "response.reasoning_text.delta" : "response.output_text.delta"},
              {"item_id", it.id},
              {"output_index", s.items.size() - 1},
              {"content_index", 0},
              {"delta", delta}};
    if (!reasoning) {
        j["logprobs"] = json::array();
    }
    return event(s, std::move(j));
}

} // namespace

std::vector<responses_item> responses_items_of(const parsed_answer & a) {
    std::vector<responses_item> out;
    if (!a.reasoning_content.empty()) {
        out.push_back({"reasoning", new_item_id("rs_"), a.reasoning_content, "", ""});
    }
    if (!a.content.empty() || (a.tool_calls.empty() && out.empty())) {
        out.push_back({"message", new_item_id("msg_"), a.content, "", ""});
    }
    for (const tool_call & c : a.tool_calls) {
        out.push_back({"function_call", new_item_id("fc_"), c.arguments, c.name, c.id.empty() ? new_tool_call_id() : c.id});
    }
    return out;
}

size_t responses_reasoning_tokens(const parsed_answer & a, const std::vector<std::string> & pieces, const std::string & reasoning_end) {
    if (a.reasoning_content.empty() || reasoning_end.empty()) {
        return 0;
    }
    std::string text;
    for (size_t i = 0; i < pieces.size(); ++i) {
        text += pieces[i];
        if (text.find(reasoning_end, text.size() - std::min(text.size(), pieces[i].size() + reasoning_end.size())) != std::string::npos) {
            return i + 1;
        }
    }
    return pieces.size();
}

json responses_body(const response_info & info, const json & echo, bool encrypted_reasoning, const finished_request & f,
                    const std::vector<responses_item> & items, size_t n_reasoning) {
    json j = response_head(info, echo);
    const char * status = status_of(f);
    const bool incomplete = std::string_view(status) == "incomplete";
    j["status"] = status;
    if (incomplete) {
        j["incomplete_details"] = {{"reason", "max_output_tokens"}};
    } else {
        j["completed_at"] = static_cast<int64_t>(std::time(nullptr));
    }
    for (size_t i = 0; i < items.size(); ++i) {
        j["output"].push_back(item_body(items[i], encrypted_reasoning, incomplete && i + 1 == items.size() ? "incomplete" : "completed"));
    }
    const size_t n_out = f.result->output.tokens.size();
    j["usage"] = {{"input_tokens", f.n_prompt},
                  {"input_tokens_details", {{"cached_tokens", f.result->n_prompt_cached}}},
                  {"output_tokens", n_out},
                  {"output_tokens_details", {{"reasoning_tokens", n_reasoning}}},
                  {"total_tokens", f.n_prompt + n_out}};
    j["specdec"] = stats_body(info, f);
    return j;
}

std::string responses_stream_start(responses_stream & s, const response_info & info) {
    const json r = response_head(info, s.echo);
    std::string out = event(s, {{"type", "response.created"}, {"response", r}});
    out += event(s, {{"type", "response.in_progress"}, {"response", r}});
    return out;
}

std::string responses_stream_events(responses_stream & s, const parsed_answer & a, bool partial) {
    const json delta = answer_delta(s.sent, a, partial); // a call without an id gets one in s.sent
    std::string out;
    if (const auto it = delta.find("reasoning_content"); it != delta.end()) {
        out += open_item(s, {"reasoning", new_item_id("rs_"), "", "", ""});
        out += text_delta(s, *it);
    }
    if (const auto it = delta.find("content"); it != delta.end()) {
        out += open_item(s, {"message", new_item_id("msg_"), "", "", ""});
        out += text_delta(s, *it);
    }
    if (const auto it = delta.find("tool_calls"); it != delta.end()) {
        for (const json & c : *it) {
            if (c.contains("id")) { // a call's first delta: its item begins
                out += open_item(s, {"function_call", new_item_id("fc_"), "", c["function"]["name"], c["id"]});
            }
            const std::string & args = c["function"]["arguments"].get_ref<const std::string &>();
            if (!args.empty()) {
                responses_item & call = s.items.back();
                call.text += args;
                out += event(s, {{"type", "response.function_call_arguments.delta"},
                                 {"item_id", call.id},
                                 {"output_index", s.items.size() - 1},
                                 {"delta", args}});
            }
        }
    }
    return out;
}

std::string responses_stream_end(responses_stream & s, const response_info & info, const finished_request & f, size_t n_reasoning) {
    if (s.items.empty()) { // nothing was written: the output is one empty message, as a whole response's
        s.items.push_back({"message", new_item_id("msg_"), "", "", ""});
        s.open = true;
    }
    std::string out = close_item(s, status_of(f));
    json r = responses_body(info, s.echo, s.encrypted_reasoning, f, s.items, n_reasoning);
    const std::string type = r["status"] == "incomplete" ? "response.incomplete" : "response.completed";
    out += event(s, {{"type", type}, {"response", std::move(r)}});
    return out;
}

std::string responses_stream_failure(responses_stream & s, const response_info & info, const api_error & e) {
    std::string out = event(s, {{"type", "error"}, {"code", e.code().empty() ? json() : json(e.code())}, {"message", e.what()},
                                {"param", e.param().empty() ? json() : json(e.param())}});
    json r = response_head(info, s.echo);
    r["status"] = "failed";
    r["error"] = {{"code", "server_error"}, {"message", e.what()}};
    for (const responses_item & it : s.items) {
        r["output"].push_back(item_body(it, s.encrypted_reasoning, "incomplete"));
    }
    out += event(s, {{"type", "response.failed"}, {"response", std::move(r)}});
    return out;
}

} // namespace cli::serve
