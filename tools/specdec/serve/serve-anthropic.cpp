#include "serve-anthropic.h"

#include <algorithm>
#include <limits>
#include <random>

namespace cli::serve {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json; // a tool's input_schema keeps its keys' order into the template

api_error bad_field(const std::string & field, const std::string & message) {
    return invalid_request("'" + field + "' " + message, field);
}

// A string, or an array of text blocks ({type: "text", text}) joined with
// newlines, as text; `field` names it in errors.
std::string block_text(const ojson & v, const std::string & field) {
    if (v.is_string()) {
        return v.get<std::string>();
    }
    if (!v.is_array()) {
        throw bad_field(field, "must be a string or an array of text blocks");
    }
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        const ojson & b = v[i];
        const std::string at = field + "[" + std::to_string(i) + "]";
        if (!b.is_object() || b.value("type", "") != "text" || !b.contains("text") || !b["text"].is_string()) {
            throw bad_field(at, "must be a text block {\"type\": \"text\", \"text\": ...} (this server takes text only)");
        }
        if (i > 0) {
            out += '\n';
        }
        out += b["text"].get_ref<const std::string &>();
    }
    return out;
}

const ojson * find(const ojson & o, const char * key) {
    const auto it = o.find(key);
    return it == o.end() || it->is_null() ? nullptr : &*it;
}

// One Anthropic message as OpenAI chat messages, appended to `out`.
void translate_message(const ojson & m, const std::string & where, ojson & out) {
    if (!m.is_object()) {
        throw bad_field(where, "must be an object");
    }
    const ojson * role = find(m, "role");
    if (role == nullptr || (*role != "user" && *role != "assistant")) {
        throw bad_field(where + ".role", "must be \"user\" or \"assistant\"");
    }
    const bool user = *role == "user";
    const ojson * content = find(m, "content");
    if (content == nullptr) {
        throw bad_field(where + ".content", "is required");
    }
    ojson msg = {{"role", role->get<std::string>()}};
    if (content->is_string()) {
        msg["content"] = content->get<std::string>();
        out.push_back(std::move(msg));
        return;
    }
    if (!content->is_array()) {
        throw bad_field(where + ".content", "must be a string or an array of content blocks");
    }
    std::string text;
    std::string reasoning;
    ojson calls = ojson::array();
    for (size_t i = 0; i < content->size(); ++i) {
        const ojson & b = (*content)[i];
        const std::string at = where + ".content[" + std::to_string(i) + "]";
        const ojson * type = b.is_object() ? find(b, "type") : nullptr;
        if (type == nullptr || !type->is_string()) {
            throw bad_field(at + ".type", "is required (a content block is an object with a type)");
        }
        const std::string t = type->get<std::string>();
        if (t == "text") {
            const ojson * s = find(b, "text");
            if (s == nullptr || !s->is_string()) {
                throw bad_field(at + ".text", "must be a string");
            }
            if (!text.empty()) {
                text += '\n';
            }
            text += s->get_ref<const std::string &>();
        } else if (t == "tool_use" && !user) {
            const ojson * id = find(b, "id");
            const ojson * name = find(b, "name");
            const ojson * input = find(b, "input");
            if (id == nullptr || !id->is_string() || name == nullptr || !name->is_string()) {
                throw bad_field(at, "must be a tool_use block with a string id and name");
            }
            if (input != nullptr && !input->is_object()) {
                throw bad_field(at + ".input", "must be an object");
            }
            calls.push_back({{"id", *id},
                             {"type", "function"},
                             {"function", {{"name", *name}, {"arguments", input != nullptr ? input->dump() : "{}"}}}});
        } else if (t == "thinking" && !user) {
            const ojson * s = find(b, "thinking");
            if (s == nullptr || !s->is_string()) {
                throw bad_field(at + ".thinking", "must be a string");
            }
            reasoning += s->get<std::string>(); // its signature is not checked: this server signs nothing
        } else if (t == "tool_result" && user) {
            const ojson * id = find(b, "tool_use_id");
            if (id == nullptr || !id->is_string()) {
                throw bad_field(at + ".tool_use_id", "must be a string");
            }
            const ojson * c = find(b, "content");
            std::string result = c == nullptr ? "" : block_text(*c, at + ".content");
            const ojson * is_error = find(b, "is_error");
            if (is_error != nullptr && !is_error->is_boolean()) {
                throw bad_field(at + ".is_error", "must be a boolean");
            }
            if (is_error != nullptr && is_error->get<bool>()) {
                result = "Error: " + result;
            }
            out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", result}});
        } else {
            throw bad_field(at + ".type", "is \"" + t + "\"; a " + (user ? "user" : "assistant") + " turn takes " +
                                              (user ? "text and tool_result" : "text, tool_use and thinking") + " blocks here");
        }
    }
    if (user && text.empty() && !out.empty() && out.back()["role"] == "tool") {
        return; // a turn of tool results only
    }
    msg["content"] = text;
    if (!reasoning.empty()) {
        msg["reasoning_content"] = reasoning;
    }
    if (!calls.empty()) {
        msg["tool_calls"] = std::move(calls);
    }
    out.push_back(std::move(msg));
}

// Anthropic's tools and tool_choice into OpenAI's, in `chat`.
void translate_tools(const ojson & j, ojson & chat) {
    if (const ojson * tools = find(j, "tools")) {
        if (!tools->is_array()) {
            throw bad_field("tools", "must be an array");
        }
        ojson out = ojson::array();
        for (size_t i = 0; i < tools->size(); ++i) {
            const ojson & t = (*tools)[i];
            const std::string at = "tools[" + std::to_string(i) + "]";
            if (!t.is_object()) {
                throw bad_field(at, "must be an object");
            }
            for (const auto & [key, value] : t.items()) {
                if (key != "name" && key != "description" && key != "input_schema" && key != "type" && key != "cache_control") {
                    throw bad_field(at + "." + key, "is not supported by this server (a tool is {name, description, input_schema})");
                }
            }
            if (const ojson * type = find(t, "type"); type != nullptr && *type != "custom") {
                throw bad_field(at + ".type", "names a server tool; this server takes client tools only");
            }
            ojson fn = {{"name", t.contains("name") ? t["name"] : ojson()}};
            if (const ojson * d = find(t, "description")) {
                fn["description"] = *d;
            }
            if (const ojson * s = find(t, "input_schema")) {
                fn["parameters"] = *s;
            }
            out.push_back({{"type", "function"}, {"function", std::move(fn)}});
        }
        chat["tools"] = std::move(out);
    }
    if (const ojson * c = find(j, "tool_choice")) {
        const ojson * type = c->is_object() ? find(*c, "type") : nullptr;
        if (type == nullptr || !type->is_string()) {
            throw bad_field("tool_choice", "must be an object {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
        }
        if (*type == "auto") {
            chat["tool_choice"] = "auto";
        } else if (*type == "any") {
            chat["tool_choice"] = "required";
        } else if (*type == "none") {
            chat["tool_choice"] = "none";
        } else if (*type == "tool") {
            const ojson * name = find(*c, "name");
            if (name == nullptr) {
                throw bad_field("tool_choice.name", "is required with type \"tool\"");
            }
            chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
        } else {
            throw bad_field("tool_choice.type", "must be \"auto\", \"any\", \"tool\" or \"none\"");
        }
        if (const ojson * d = find(*c, "disable_parallel_tool_use")) {
            if (!d->is_boolean()) {
                throw bad_field("tool_choice.disable_parallel_tool_use", "must be a boolean");
            }
            if (d->get<bool>()) {
                chat["parallel_tool_calls"] = false;
            }
        }
    }
}

void translate_thinking(const ojson & j, ojson & chat) {
    const ojson * t = find(j, "thinking");
    if (t == nullptr) {
        return; // the server's default
    }
    const ojson * type = t->is_object() ? find(*t, "type") : nullptr;
    if (type == nullptr || (*type != "enabled" && *type != "disabled")) {
        throw bad_field("thinking", "must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": \"disabled\"}");
    }
    chat["chat_template_kwargs"] = {{"enable_thinking", *type == "enabled"}};
    if (*type == "enabled") {
        const ojson * budget = find(*t, "budget_tokens");
        if (budget == nullptr || !budget->is_number_integer() || budget->get<int64_t>() < 0 ||
            budget->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
            throw bad_field("thinking.budget_tokens", "must be an integer of at least 0 with thinking enabled");
        }
        chat["reasoning_budget_tokens"] = *budget;
    }
}

// Fields that do not change the result: dropped.
bool ignored_field(const std::string & key) {
    return key == "metadata" || key == "service_tier";
}

} // namespace

std::string anthropic_chat_body(std::string_view body, const request_limits & limits, bool count_tokens) {
    parse_json_body(body, limits); // the bounds, and a 400 for what is not JSON, before the ordered parse
    const ojson j = ojson::parse(body.begin(), body.end());
    if (!j.is_object()) {
        throw invalid_request("the body must be a JSON object", "", "invalid_json");
    }
    static const char * const known[] = {"model", "max_tokens", "system", "messages", "stop_sequences", "temperature",
                                         "top_p", "top_k", "stream", "tools", "tool_choice", "thinking"};
    for (const auto & [key, value] : j.items()) {
        const bool ok = ignored_field(key) || std::find(std::begin(known), std::end(known), key) != std::end(known);
        if (!ok && !value.is_null()) {
            throw invalid_request("'" + key + "' is not supported by this server, and ignoring it would change the result; omit it",
                                  key, "unsupported_parameter");
        }
    }
    ojson chat = ojson::object();
    for (const char * key : {"model", "stream", "top_p", "top_k"}) {
        if (const ojson * v = find(j, key)) {
            chat[key] = *v;
        }
    }
    if (count_tokens) {
        chat.erase("stream");
    }
    const ojson * max_tokens = find(j, "max_tokens");
    if (max_tokens != nullptr) {
        if (!max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1) {
            throw bad_field("max_tokens", "must be an integer of at least 1");
        }
        chat["max_tokens"] = *max_tokens;
    } else if (!count_tokens) {
        throw invalid_request("'max_tokens' is required", "max_tokens", "missing_field");
    }
    if (const ojson * t = find(j, "temperature")) {
        if (!t->is_number() || t->get<double>() < 0.0 || t->get<double>() > 1.0) {
            throw bad_field("temperature", "must be a number within [0, 1]");
        }
        chat["temperature"] = *t;
    }
    if (const ojson * s = find(j, "stop_sequences")) {
        if (!s->is_array()) {
            throw bad_field("stop_sequences", "must be an array of strings");
        }
        if (!s->empty()) {
            chat["stop"] = *s; // each string checked as a stop string
        }
    }
    ojson messages = ojson::array();
    if (const ojson * system = find(j, "system")) {
        messages.push_back({{"role", "system"}, {"content", block_text(*system, "system")}});
    }
    const ojson * list = find(j, "messages");
    if (list == nullptr || !list->is_array() || list->empty()) {
        throw invalid_request("'messages' is required: an array of at least one message", "messages",
                              list == nullptr ? "missing_field" : "invalid_value");
    }
    for (size_t i = 0; i < list->size(); ++i) {
        translate_message((*list)[i], "messages[" + std::to_string(i) + "]", messages);
    }
    chat["messages"] = std::move(messages);
    translate_tools(j, chat);
    translate_thinking(j, chat);
    return chat.dump();
}

parsed_request parse_anthropic_request(std::string_view body, const request_limits & limits, bool count_tokens) {
    return parse_request(endpoint::chat, anthropic_chat_body(body, limits, count_tokens), limits);
}

json anthropic_error_body(const api_error & e) {
    const char * type = "api_error";
    switch (e.status()) {
        case 400: case 408: case 411: case 413: case 431: type = "invalid_request_error"; break;
        case 401: type = "authentication_error"; break;
        case 403: type = "permission_error"; break;
        case 404: type = "not_found_error"; break;
        case 429: type = "rate_limit_error"; break;
        case 503: type = "overloaded_error"; break;
        default: break;
    }
    return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

std::string new_tool_use_id() {
    std::string id = "toolu_";
    id += std::string_view(new_tool_call_id()).substr(5); // the same 24 random letters and digits after "call_"
    return id;
}

anthropic_stop anthropic_stop_of(const finished_request & f, const parsed_answer & a, const std::vector<std::string> & stop,
                                 const std::string & pieces) {
    const specdec_stop_reason why = f.result->output.stop;
    anthropic_stop out{nullptr, nullptr};
    if (why == SPECDEC_STOP_BUDGET || why == SPECDEC_STOP_CONTEXT) {
        out.reason = "max_tokens";
        return out;
    }
    if (why != SPECDEC_STOP_EOG && why != SPECDEC_STOP_STRING) {
        return out; // cancelled or failed: no message
    }
    if (why == SPECDEC_STOP_STRING) {
        // The engine cut the text before the earliest occurrence of any stop
        // string; the client's that begins there (the longest if several) ended it.
        const size_t from = std::min(f.result->output.text.size(), pieces.size());
        size_t best = std::string::npos;
        for (const std::string & s : stop) {
            const size_t at = pieces.find(s, from > s.size() ? from - s.size() : 0);
            if (at != std::string::npos && (at < best || (at == best && s.size() > out.sequence.get<std::string>().size()))) {
                best = at;
                out.sequence = s;
            }
        }
        if (!out.sequence.is_null()) {
            out.reason = "stop_sequence";
            return out;
        }
    }
    out.reason = a.tool_calls.empty() ? "end_turn" : "tool_use";
    return out;
}

namespace {

// A call's arguments as the input object (not an object, or not JSON: {}).
json tool_input(const std::string & arguments) {
    json input = json::parse(arguments, nullptr, false);
    return input.is_object() ? input : json::object();
}

json usage_of(size_t n_input, size_t n_output) {
    return {{"input_tokens", n_input}, {"output_tokens", n_output}};
}

} // namespace

json anthropic_message_body(const response_info & info, const finished_request & f, const parsed_answer & a, const anthropic_stop & stop) {
    json content = json::array();
    if (!a.reasoning_content.empty()) {
        content.push_back({{"type", "thinking"}, {"thinking", a.reasoning_content}, {"signature", ""}});
    }
    if (!a.content.empty()) {
        content.push_back({{"type", "text"}, {"text", a.content}});
    }
    for (const tool_call & c : a.tool_calls) {
        content.push_back({{"type", "tool_use"}, {"id", c.id.empty() ? new_tool_use_id() : c.id}, {"name", c.name}, {"input", tool_input(c.arguments)}});
    }
    return {{"id", info.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", info.model},
            {"content", std::move(content)},
            {"stop_reason", stop.reason},
            {"stop_sequence", stop.sequence},
            {"usage", usage_of(f.n_prompt, f.result->output.tokens.size())},
            {"specdec", stats_body(info, f)}};
}

json anthropic_count_tokens_body(size_t n_input) {
    return {{"input_tokens", n_input}};
}

std::string anthropic_stream_start(const response_info & info, size_t n_prompt) {
    return typed_sse_event({{"type", "message_start"},
                                {"message",
                                 {{"id", info.id},
                                  {"type", "message"},
                                  {"role", "assistant"},
                                  {"model", info.model},
                                  {"content", json::array()},
                                  {"stop_reason", nullptr},
                                  {"stop_sequence", nullptr},
                                  {"usage", usage_of(n_prompt, 0)}}}});
}

namespace {

// Stops the open block, if any, of another type than `type` and starts `start`'s; "" when `type` is the open one's.
std::string switch_block(anthropic_stream & s, const std::string & type, const json & start) {
    if (s.open == type && type != "tool_use") {
        return "";
    }
    std::string out;
    if (!s.open.empty()) {
        out += typed_sse_event({{"type", "content_block_stop"}, {"index", s.n_blocks - 1}});
    }
    out += typed_sse_event({{"type", "content_block_start"}, {"index", s.n_blocks}, {"content_block", start}});
    s.open = type;
    ++s.n_blocks;
    return out;
}

std::string block_delta(const anthropic_stream & s, json delta) {
    return typed_sse_event({{"type", "content_block_delta"}, {"index", s.n_blocks - 1}, {"delta", std::move(delta)}});
}

} // namespace

std::string anthropic_stream_events(anthropic_stream & s, parsed_answer a, bool partial) {
    for (size_t i = s.sent.calls.size(); i < a.tool_calls.size(); ++i) {
        if (a.tool_calls[i].id.empty()) {
            a.tool_calls[i].id = new_tool_use_id(); // kept by answer_delta once the call's first delta is sent
        }
    }
    const json delta = answer_delta(s.sent, a, partial);
    std::string out;
    if (const auto it = delta.find("reasoning_content"); it != delta.end()) {
        out += switch_block(s, "thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
        out += block_delta(s, {{"type", "thinking_delta"}, {"thinking", *it}});
    }
    if (const auto it = delta.find("content"); it != delta.end()) {
        out += switch_block(s, "text", {{"type", "text"}, {"text", ""}});
        out += block_delta(s, {{"type", "text_delta"}, {"text", *it}});
    }
    if (const auto it = delta.find("tool_calls"); it != delta.end()) {
        for (const json & c : *it) {
            if (c.contains("id")) { // a call's first delta: its block begins
                out += switch_block(s, "tool_use", {{"type", "tool_use"}, {"id", c["id"]}, {"name", c["function"]["name"]}, {"input", json::object()}});
            }
            const std::string & args = c["function"]["arguments"].get_ref<const std::string &>();
            if (!args.empty()) {
                out += block_delta(s, {{"type", "input_json_delta"}, {"partial_json", args}});
            }
        }
    }
    return out;
}

std::string anthropic_stream_end(anthropic_stream & s, const response_info & info, const finished_request & f, const anthropic_stop & stop) {
    std::string out;
    if (!s.open.empty()) {
        out += typed_sse_event({{"type", "content_block_stop"}, {"index", s.n_blocks - 1}});
        s.open.clear();
    }
    out += typed_sse_event({{"type", "message_delta"},
                                {"delta", {{"stop_reason", stop.reason}, {"stop_sequence", stop.sequence}}},
                                {"usage", {{"output_tokens", f.result->output.tokens.size()}}},
                                {"specdec", stats_body(info, f)}});
    out += typed_sse_event({{"type", "message_stop"}});
    return out;
}

} // namespace cli::serve
