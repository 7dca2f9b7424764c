#include "serve-openai.h"

#include "json-text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

namespace cli::serve {

api_error::api_error(int status, std::string type, const std::string & message, std::string param, std::string code)
    : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)), code_(std::move(code)) {}

api_error invalid_request(const std::string & message, const std::string & param, const std::string & code) {
    return api_error(400, "invalid_request_error", message, param, code);
}

nlohmann::json error_body(const api_error & e) {
    const auto or_null = [](const std::string & s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
    return {{"error", {{"message", e.what()}, {"type", e.type()}, {"param", or_null(e.param())}, {"code", or_null(e.code())}}}};
}

namespace {

using json = nlohmann::json;

const char * type_name(const json & v) {
    switch (v.type()) {
        case json::value_t::null:            return "null";
        case json::value_t::boolean:         return "a boolean";
        case json::value_t::string:          return "a string";
        case json::value_t::array:           return "an array";
        case json::value_t::object:          return "an object";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "an integer";
        case json::value_t::number_float:    return "a number";
        default:                             return "something else";
    }
}

// A client's value in a message: a number or boolean as sent, a string
// quoted and cut at 64 bytes, anything else by its type (a value may be
// megabytes, or deep).
std::string describe(const json & v);
std::string describe(const std::string & s) { return describe(json(s)); }

std::string describe(const json & v) {
    if (v.is_number() || v.is_boolean() || v.is_null()) {
        return v.dump();
    }
    if (v.is_string()) {
        const std::string & s = v.get_ref<const std::string &>();
        return s.size() <= 64 ? json(s).dump() : json(s.substr(0, 64)).dump() + "...";
    }
    return type_name(v);
}

api_error wrong_type(const std::string & field, const char * want, const json & got) {
    return invalid_request("'" + field + "' must be " + want + ", not " + type_name(got), field, "invalid_type");
}

// A number field within [lo, hi] (open at lo when lo_open, at hi when hi_open).
float number_in(const json & body, const char * field, float fallback, double lo, double hi, bool lo_open, bool hi_open) {
    const auto it = body.find(field);
    if (it == body.end() || it->is_null()) {
        return fallback;
    }
    if (!it->is_number()) {
        throw wrong_type(field, "a number", *it);
    }
    const double v = it->get<double>();
    const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (!ok) {
        throw invalid_request("'" + std::string(field) + "' is " + it->dump() + "; it must be within " + (lo_open ? "(" : "[") +
                                  json(lo).dump() + ", " + json(hi).dump() + (hi_open ? ")" : "]"),
                              field);
    }
    return static_cast<float>(v);
}

// An integer field within [lo, hi]; `present` says whether it was given.
int64_t integer_in(const json & body, const char * field, int64_t fallback, int64_t lo, int64_t hi, bool * present = nullptr) {
    const auto it = body.find(field);
    if (present != nullptr) {
        *present = it != body.end() && !it->is_null();
    }
    if (it == body.end() || it->is_null()) {
        return fallback;
    }
    if (!it->is_number_integer()) {
        throw wrong_type(field, "an integer", *it);
    }
    // A JSON integer that is not negative reads as unsigned: below lo only when lo > 0.
    if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(hi) || (lo > 0 && it->get<uint64_t>() < static_cast<uint64_t>(lo))
                                 : (it->get<int64_t>() < lo || it->get<int64_t>() > hi)) {
        throw invalid_request("'" + std::string(field) + "' is " + it->dump() + "; it must be within [" + std::to_string(lo) +
                                  ", " + std::to_string(hi) + "]",
                              field);
    }
    return it->get<int64_t>();
}

std::string text_content(const json & content, const std::string & field, std::vector<std::string> * parts) {
    if (content.is_null()) {
        return "";
    }
    if (content.is_string()) {
        return content.get<std::string>();
    }
    if (!content.is_array()) {
        throw wrong_type(field, "a string or an array of text parts", content);
    }
    std::string out;
    for (size_t i = 0; i < content.size(); ++i) {
        const json & part = content[i];
        const std::string where = field + "[" + std::to_string(i) + "]";
        if (!part.is_object()) {
            throw wrong_type(where, "an object", part);
        }
        const auto type = part.find("type");
        if (type == part.end() || !type->is_string() || type->get<std::string>() != "text") {
            throw invalid_request("'" + where + ".type' must be \"text\" (this server takes text only)", where + ".type");
        }
        const auto text = part.find("text");
        if (text == part.end() || !text->is_string()) {
            throw wrong_type(where + ".text", "a string", text == part.end() ? json() : *text);
        }
        if (i > 0) {
            out += '\n';
        }
        out += text->get<std::string>();
        if (parts != nullptr) {
            parts->push_back(text->get<std::string>());
        }
    }
    return out;
}

// A string field of `obj` ("" when absent or null).
std::string optional_string(const json & obj, const char * field, const std::string & where) {
    const auto it = obj.find(field);
    if (it == obj.end() || it->is_null()) {
        return "";
    }
    if (!it->is_string()) {
        throw wrong_type(where + "." + field, "a string", *it);
    }
    return it->get<std::string>();
}

// Anthropic's bound (OpenAI's is 64): MCP tools' names (server and tool joined) run longer.
constexpr size_t max_function_name = 128;

// A function's name as OpenAI and Anthropic take it: 1 to 128 of a-z, A-Z, 0-9, _ and -.
std::string function_name(const json & obj, const std::string & where) {
    const auto it = obj.find("name");
    if (it == obj.end() || !it->is_string()) {
        throw wrong_type(where + ".name", "a string", it == obj.end() ? json() : *it);
    }
    const std::string name = it->get<std::string>();
    const bool ok = !name.empty() && name.size() <= max_function_name && std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '_' || c == '-';
    });
    if (!ok) {
        throw invalid_request("'" + where + ".name' is " + describe(name) + "; a function's name is 1 to " +
                                  std::to_string(max_function_name) + " letters, digits, _ or -",
                              where + ".name");
    }
    return name;
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}].
std::vector<tool_call> parse_message_tool_calls(const json & calls, const std::string & where, const request_limits & limits) {
    if (!calls.is_array()) {
        throw wrong_type(where, "an array", calls);
    }
    std::vector<tool_call> out;
    for (size_t i = 0; i < calls.size(); ++i) {
        const json & c = calls[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (!c.is_object()) {
            throw wrong_type(at, "an object", c);
        }
        if (const std::string type = optional_string(c, "type", at); !type.empty() && type != "function") {
            throw invalid_request("'" + at + ".type' is " + describe(type) + "; only \"function\" calls are taken", at + ".type");
        }
        const auto fn = c.find("function");
        if (fn == c.end() || !fn->is_object()) {
            throw wrong_type(at + ".function", "an object", fn == c.end() ? json() : *fn);
        }
        tool_call call;
        call.id = optional_string(c, "id", at);
        call.name = function_name(*fn, at + ".function");
        const auto args = fn->find("arguments");
        if (args == fn->end() || args->is_null()) {
            call.arguments = "{}";
        } else if (args->is_string()) { // OpenAI's shape: JSON text
            call.arguments = args->get<std::string>();
            if (json_text_depth(call.arguments) > limits.max_json_depth) {
                throw invalid_request("'" + at + ".function.arguments' nests arrays and objects deeper than " +
                                          std::to_string(limits.max_json_depth) + " levels",
                                      at + ".function.arguments", "json_too_deep");
            }
        } else if (args->is_object()) {
            call.arguments = args->dump();
        } else {
            throw wrong_type(at + ".function.arguments", "a string of JSON", *args);
        }
        out.push_back(std::move(call));
    }
    return out;
}

std::vector<chat_message> parse_messages(const json & body, const request_limits & limits) {
    const auto it = body.find("messages");
    if (it == body.end()) {
        throw invalid_request("'messages' is required", "messages", "missing_field");
    }
    if (!it->is_array()) {
        throw wrong_type("messages", "an array", *it);
    }
    if (it->empty()) {
        throw invalid_request("'messages' is empty; it needs at least one message", "messages");
    }
    std::vector<chat_message> out;
    for (size_t i = 0; i < it->size(); ++i) {
        const json & m = (*it)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) {
            throw wrong_type(where, "an object", m);
        }
        const auto role = m.find("role");
        if (role == m.end() || !role->is_string()) {
            throw wrong_type(where + ".role", "a string", role == m.end() ? json() : *role);
        }
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool") {
            throw invalid_request("'" + where + ".role' is " + describe(r) + "; it must be system, developer, user, assistant or tool",
                                  where + ".role");
        }
        const auto content = m.find("content");
        chat_message msg;
        msg.role = r;
        msg.content = text_content(content == m.end() ? json() : *content, where + ".content", &msg.content_parts);
        if (const auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
            if (r != "assistant") {
                throw invalid_request("'" + where + ".tool_calls' belongs to assistant messages", where + ".tool_calls");
            }
            msg.tool_calls = parse_message_tool_calls(*calls, where + ".tool_calls", limits);
        }
        if (r == "assistant") {
            msg.reasoning_content = optional_string(m, "reasoning_content", where);
        }
        if (r == "tool") {
            msg.tool_call_id = optional_string(m, "tool_call_id", where);
            msg.name = optional_string(m, "name", where);
        }
        out.push_back(std::move(msg));
    }
    return out;
}

std::vector<std::string> parse_stop(const json & body, const request_limits & limits) {
    const auto it = body.find("stop");
    std::vector<std::string> out;
    if (it == body.end() || it->is_null()) {
        return out;
    }
    if (it->is_string()) {
        out.push_back(it->get<std::string>());
    } else if (it->is_array()) {
        for (const json & s : *it) {
            if (!s.is_string()) {
                throw wrong_type("stop", "a string or an array of strings", *it);
            }
            out.push_back(s.get<std::string>());
        }
    } else {
        throw wrong_type("stop", "a string or an array of strings", *it);
    }
    if (out.size() > limits.max_stop) {
        throw invalid_request("'stop' has " + std::to_string(out.size()) + " strings; at most " + std::to_string(limits.max_stop) +
                                  " are taken",
                              "stop");
    }
    size_t total = 0;
    for (const auto & s : out) {
        if (s.empty()) {
            throw invalid_request("'stop' holds an empty string", "stop");
        }
        if (s.size() > limits.max_stop_bytes) {
            throw invalid_request("'stop' holds a string of " + std::to_string(s.size()) + " bytes; each may have at most " +
                                      std::to_string(limits.max_stop_bytes),
                                  "stop");
        }
        total += s.size();
    }
    if (total > limits.max_stop_total_bytes) {
        throw invalid_request("'stop' has " + std::to_string(total) + " bytes in all; at most " +
                                  std::to_string(limits.max_stop_total_bytes) + " are taken",
                              "stop");
    }
    return out;
}

// A field this server does not implement, and the values of it that ask
// for nothing (null always does). Any other value would change the result,
// so it is refused rather than ignored.
struct unimplemented_field {
    const char * name;
    const char * defaults; // for the message
    bool (*is_default)(const json &);
};

bool is_false(const json & v) { return v.is_boolean() && !v.get<bool>(); }
bool is_zero(const json & v) { return v.is_number() && v.get<double>() == 0.0; }
bool is_one(const json & v) { return v.is_number() && v.get<double>() == 1.0; }
bool is_empty(const json & v) { return v.is_string() ? v.get_ref<const std::string &>().empty() : (v.is_array() || v.is_object()) && v.empty(); }
bool is_no_tool_call(const json & v) { return v == "none" || v == "auto"; }
bool is_off_sigma(const json & v) { return v.is_number() && v.get<double>() <= 0.0; }

constexpr unimplemented_field unimplemented_fields[] = {
    {"suffix", "\"\"", is_empty},
    {"functions", "[] (the legacy form of 'tools', which this server takes)", is_empty},
    {"function_call", "\"none\" or \"auto\" (the legacy form of 'tool_choice', which this server takes)", is_no_tool_call},
    {"best_of", "1", is_one},
    // llama-server's samplers that specdec does not implement (their defaults turn them off).
    {"mirostat", "0", is_zero},
    {"typical_p", "1", is_one},
    {"tfs_z", "1", is_one},
    {"top_n_sigma", "-1", is_off_sigma},
    {"xtc_probability", "0", is_zero},
    {"dry_multiplier", "0", is_zero},
    {"dynatemp_range", "0", is_zero},
};

// logit_bias: OpenAI's {"token id": bias}, with llama-server's forms (a key
// that is not a token id is a text; a list of [token id or text, bias]
// pairs; a bias of false: -infinity). Ids go to r.logit_bias, texts to
// r.logit_bias_text (resolve_logit_bias tokenizes them), in the order sent
// (an object's: its keys'). Where llama-server skips an entry it cannot read,
// this refuses the request (400 naming logit_bias).
void parse_logit_bias(const json & body, parsed_request & r) {
    const auto it = body.find("logit_bias");
    if (it == body.end() || it->is_null()) {
        return;
    }
    if (!it->is_object() && !it->is_array()) {
        throw wrong_type("logit_bias", "an object of token ids (or texts) to biases, or a list of [token id or text, bias] pairs", *it);
    }
    const auto bias_of = [](const std::string & what, const json & value) {
        if (value.is_boolean() && !value.get<bool>()) {
            return -INFINITY; // llama-server's false: never chosen
        }
        if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
            throw invalid_request("'logit_bias' of " + what + " is " + describe(value) +
                                      "; it must be a number within [-100, 100], or false (never)",
                                  "logit_bias");
        }
        return value.get<float>();
    };
    // `id` < 0 when it is out of int64's range; `what`: as sent.
    const auto add_id = [&](int64_t id, const std::string & what, float bias) {
        if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
            throw invalid_request("'logit_bias' names the token " + what + ", which is no token id", "logit_bias");
        }
        r.logit_bias.push_back({static_cast<llama_token>(id), bias});
    };
    const auto add_text = [&](const std::string & text, float bias) { r.logit_bias_text.push_back({text, bias, r.logit_bias.size()}); };
    if (it->is_object()) {
        for (const auto & [key, value] : it->items()) {
            if (key.empty()) {
                throw invalid_request("'logit_bias' has an empty key; keys are token ids or texts", "logit_bias");
            }
            const float bias = bias_of(describe(key), value);
            // A key that strtol reads whole is a token id (llama-server's test), else a text.
            char * end = nullptr;
            errno = 0;
            const long long id = std::strtoll(key.c_str(), &end, 10);
            if (*end == '\0') {
                add_id(errno == ERANGE ? -1 : id, describe(key), bias);
            } else {
                add_text(key, bias);
            }
        }
        return;
    }
    for (const json & pair : *it) {
        if (!pair.is_array() || pair.size() != 2 || !(pair[0].is_number_integer() || pair[0].is_string())) {
            throw invalid_request("'logit_bias' holds " + describe(pair) + "; each entry is a [token id or text, bias] pair", "logit_bias");
        }
        const float bias = bias_of(describe(pair[0]), pair[1]);
        if (pair[0].is_string()) {
            add_text(pair[0].get<std::string>(), bias);
        } else {
            add_id(pair[0].is_number_unsigned() && pair[0].get<uint64_t>() > uint64_t(INT64_MAX) ? -1 : pair[0].get<int64_t>(),
                   pair[0].dump(), bias);
        }
    }
}

// The body's top-level field `key` (present), with its objects' keys in the
// order sent: `json` sorts them, and llama.cpp's converter writes a JSON
// schema's properties in that order (as llama-server keeps them). Only that
// field enters the tree: ordered_json finds a key by a linear search, and a
// body of 200k other fields would cost seconds (serve-hostile).
nlohmann::ordered_json field_as_sent(std::string_view raw, const char * key) {
    using ordered = nlohmann::ordered_json;
    const ordered::parser_callback_t only_key = [key](int depth, ordered::parse_event_t event, ordered & parsed) {
        return depth != 1 || event != ordered::parse_event_t::key || parsed == key;
    };
    return ordered::parse(raw.begin(), raw.end(), only_key).at(key);
}

// The JSON schema a request asks its output to follow, as JSON text: OpenAI's
// response_format (json_object: any object; json_schema: its schema), or
// llama-server's json_schema, its keys in the order sent. None for
// response_format text. `raw`: the text `body` was parsed from.
std::optional<std::string> parse_json_schema(const json & body, std::string_view raw) {
    if (const auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
        if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) {
            throw wrong_type("response_format", "an object with a 'type'", *it);
        }
        const std::string type = (*it)["type"].get<std::string>();
        if (type == "text") {
            return std::nullopt;
        }
        if (type == "json_object") {
            return std::string(R"({"type": "object"})");
        }
        if (type == "json_schema") {
            const json & js = it->value("json_schema", json());
            if (!js.is_object() || !js.contains("schema") || !js["schema"].is_object()) {
                throw invalid_request("'response_format' of type json_schema needs 'json_schema': {'name', 'schema': {...}}",
                                      "response_format");
            }
            return js["schema"].empty() ? std::string(R"({"type": "object"})") : field_as_sent(raw, "response_format").at("json_schema").at("schema").dump();
        }
        throw invalid_request("'response_format' type " + describe(type) + " is not one of text, json_object, json_schema", "response_format");
    }
    if (const auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) {
            throw wrong_type("json_schema", "an object", *it);
        }
        return it->empty() ? std::string(R"({"type": "object"})") : field_as_sent(raw, "json_schema").dump();
    }
    return std::nullopt;
}

// Chat's `tools` ([{type: "function", function: {name, description,
// parameters}}]), `tool_choice` ("none", "auto", "required" or {type:
// "function", function: {name}}) and `parallel_tool_calls`. `raw`: the text
// `body` was parsed from (the parameters' keys keep their order).
chat_tools parse_tools(const json & body, endpoint kind, std::string_view raw) {
    chat_tools out;
    const auto tools = body.find("tools");
    const bool listed = tools != body.end() && !tools->is_null() && !is_empty(*tools);
    const auto choice = body.find("tool_choice");
    const bool chosen = choice != body.end() && !choice->is_null();
    if (kind == endpoint::completions) {
        if (listed || (chosen && !is_no_tool_call(*choice))) {
            throw invalid_request(std::string("'") + (listed ? "tools" : "tool_choice") + "' belongs to chat completions",
                                  listed ? "tools" : "tool_choice", "unsupported_parameter");
        }
        return out;
    }
    if (listed) {
        if (!tools->is_array()) {
            throw wrong_type("tools", "an array", *tools);
        }
        const nlohmann::ordered_json sent = field_as_sent(raw, "tools");
        for (size_t i = 0; i < tools->size(); ++i) {
            const json & t = (*tools)[i];
            const std::string at = "tools[" + std::to_string(i) + "]";
            if (!t.is_object()) {
                throw wrong_type(at, "an object", t);
            }
            if (const std::string type = optional_string(t, "type", at); type != "function") {
                throw invalid_request("'" + at + ".type' is " + describe(type) + "; this server takes tools of type \"function\"", at + ".type");
            }
            const auto fn = t.find("function");
            if (fn == t.end() || !fn->is_object()) {
                throw wrong_type(at + ".function", "an object", fn == t.end() ? json() : *fn);
            }
            tool_function f;
            f.name = function_name(*fn, at + ".function");
            f.description = optional_string(*fn, "description", at + ".function");
            if (const auto params = fn->find("parameters"); params != fn->end() && !params->is_null()) {
                if (!params->is_object()) {
                    throw wrong_type(at + ".function.parameters", "an object (a JSON schema)", *params);
                }
                f.parameters = sent.at(i).at("function").at("parameters").dump();
            }
            for (const tool_function & g : out.functions) {
                if (g.name == f.name) {
                    throw invalid_request("'tools' names the function '" + f.name + "' twice", at + ".function.name");
                }
            }
            out.functions.push_back(std::move(f));
        }
    }
    if (chosen) {
        if (choice->is_string()) {
            const std::string c = choice->get<std::string>();
            if (c == "none") {
                out.choice = tool_choice::none;
            } else if (c == "auto") {
                out.choice = tool_choice::automatic;
            } else if (c == "required") {
                out.choice = tool_choice::required;
            } else {
                throw invalid_request("'tool_choice' is " + describe(c) + "; it must be \"none\", \"auto\", \"required\" or "
                                      "{\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
            }
        } else if (choice->is_object()) {
            if (optional_string(*choice, "type", "tool_choice") != "function" || !choice->contains("function") ||
                !(*choice)["function"].is_object()) {
                throw invalid_request("'tool_choice' as an object is {\"type\": \"function\", \"function\": {\"name\": ...}}",
                                      "tool_choice");
            }
            out.choice = tool_choice::required;
            out.forced = function_name((*choice)["function"], "tool_choice.function");
            const bool known = std::any_of(out.functions.begin(), out.functions.end(),
                                           [&](const tool_function & f) { return f.name == out.forced; });
            if (!known) {
                throw invalid_request("'tool_choice' names the function '" + out.forced + "', which 'tools' does not list",
                                      "tool_choice");
            }
        } else {
            throw wrong_type("tool_choice", "a string or an object", *choice);
        }
        if (out.choice == tool_choice::required && out.functions.empty()) {
            throw invalid_request("'tool_choice' asks for a call, and 'tools' lists no function", "tool_choice");
        }
    }
    if (const auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
        if (!p->is_boolean()) {
            throw wrong_type("parallel_tool_calls", "a boolean", *p);
        }
        out.parallel = p->get<bool>();
    }
    return out;
}

// Chat's reasoning_format, chat_template_kwargs and reasoning_effort into `r`
// (llama-server's fields; completions have no template: 400 there).
void parse_thinking(const json & body, endpoint kind, parsed_request & r) {
    for (const char * field : {"reasoning_format", "chat_template_kwargs", "reasoning_effort", "reasoning_budget_tokens",
                               "thinking_budget_tokens", "reasoning_budget_message"}) {
        const auto it = body.find(field);
        if (kind == endpoint::completions && it != body.end() && !it->is_null()) {
            throw invalid_request(std::string("'") + field + "' belongs to chat completions (a completion has no chat template)",
                                  field, "unsupported_parameter");
        }
    }
    if (const auto it = body.find("reasoning_format"); it != body.end() && !it->is_null()) {
        r.reasoning = it->is_string() ? reasoning_format_from_name(it->get<std::string>()) : std::nullopt;
        if (!r.reasoning) {
            throw invalid_request("'reasoning_format' is " + describe(*it) + "; it must be \"none\", \"auto\", \"deepseek\" or "
                                  "\"deepseek-legacy\"",
                                  "reasoning_format");
        }
    }
    if (const auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) {
            throw wrong_type("chat_template_kwargs", "an object of template variables", *it);
        }
        for (const auto & [name, value] : it->items()) {
            if (name == "enable_thinking") {
                if (!value.is_boolean()) {
                    throw wrong_type("chat_template_kwargs.enable_thinking", "a boolean", value);
                }
                r.enable_thinking = value.get<bool>();
            }
            r.template_kwargs[name] = value.dump();
        }
    }
    for (const char * field : {"reasoning_budget_tokens", "thinking_budget_tokens"}) {
        bool given = false;
        const auto n = static_cast<int32_t>(integer_in(body, field, -1, -1, std::numeric_limits<int32_t>::max(), &given));
        if (given && !r.reasoning_budget) {
            r.reasoning_budget = n;
        }
    }
    if (const auto it = body.find("reasoning_budget_message"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) {
            throw wrong_type("reasoning_budget_message", "a string", *it);
        }
        r.reasoning_budget_message = it->get<std::string>();
    }
    if (const auto it = body.find("reasoning_effort"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) {
            throw wrong_type("reasoning_effort", "a string", *it);
        }
        if (*it == "none") { // OpenAI's way to ask for no reasoning
            r.enable_thinking = false;
            r.template_kwargs.erase("reasoning_effort");
        } else {
            r.template_kwargs["reasoning_effort"] = it->dump();
        }
    }
}

// Chat's add_generation_prompt and continue_final_message into `r`
// (llama-server's and vLLM's fields; a completion has no template: 400 there).
void parse_continuation(const json & body, endpoint kind, parsed_request & r) {
    for (const char * field : {"add_generation_prompt", "continue_final_message"}) {
        const auto it = body.find(field);
        if (kind == endpoint::completions && it != body.end() && !it->is_null()) {
            throw invalid_request(std::string("'") + field + "' belongs to chat completions (a completion has no chat template)",
                                  field, "unsupported_parameter");
        }
    }
    if (const auto it = body.find("add_generation_prompt"); it != body.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            throw wrong_type("add_generation_prompt", "a boolean", *it);
        }
        r.add_generation_prompt = it->get<bool>();
    }
    if (const auto it = body.find("continue_final_message"); it != body.end() && !it->is_null()) {
        if (it->is_boolean()) {
            r.continue_final = it->get<bool>() ? continuation::automatic : continuation::none;
        } else if (*it == "reasoning_content") {
            r.continue_final = continuation::reasoning;
        } else if (*it == "content") {
            r.continue_final = continuation::content;
        } else {
            throw invalid_request("'continue_final_message' is " + describe(*it) + "; it must be a boolean, \"reasoning_content\" "
                                  "or \"content\"",
                                  "continue_final_message");
        }
    }
}

void refuse_unimplemented(const json & body) {
    for (const unimplemented_field & f : unimplemented_fields) {
        const auto it = body.find(f.name);
        if (it != body.end() && !it->is_null() && !f.is_default(*it)) {
            throw invalid_request("'" + std::string(f.name) + "' is not supported by this server, and ignoring it would change the "
                                      "result; omit it or send " + f.defaults,
                                  f.name, "unsupported_parameter");
        }
    }
}

// Completions: `logprobs` N (0..5, the legacy API's bound) alternatives per
// token. Chat: `logprobs` true, with `top_logprobs` (0..20) alternatives.
int32_t parse_logprobs(const json & body, endpoint kind) {
    const auto it = body.find("logprobs");
    const bool given = it != body.end() && !it->is_null();
    if (kind == endpoint::completions) {
        if (const auto top = body.find("top_logprobs"); top != body.end() && !top->is_null() && !is_zero(*top)) {
            throw invalid_request("'top_logprobs' belongs to chat completions; completions take 'logprobs': N", "top_logprobs");
        }
        if (!given || is_false(*it)) {
            return -1;
        }
        return static_cast<int32_t>(integer_in(body, "logprobs", -1, 0, 5));
    }
    if (given && !it->is_boolean()) {
        throw wrong_type("logprobs", "a boolean", *it);
    }
    bool top_given = false;
    const auto n_top = static_cast<int32_t>(integer_in(body, "top_logprobs", 0, 0, SPECDEC_MAX_TOP_LOGPROBS, &top_given));
    const bool on = given && it->get<bool>();
    if (top_given && !on) {
        throw invalid_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
    return on ? n_top : -1;
}

// stream_options.include_usage, which only a stream may carry.
bool parse_include_usage(const json & body, bool stream) {
    const auto it = body.find("stream_options");
    if (it == body.end() || it->is_null()) {
        return false;
    }
    if (!stream) {
        throw invalid_request("'stream_options' is only allowed with 'stream': true", "stream_options");
    }
    if (!it->is_object()) {
        throw wrong_type("stream_options", "an object", *it);
    }
    const auto usage = it->find("include_usage");
    if (usage == it->end() || usage->is_null()) {
        return false;
    }
    if (!usage->is_boolean()) {
        throw wrong_type("stream_options.include_usage", "a boolean", *usage);
    }
    return usage->get<bool>();
}

} // namespace

namespace {

// A SAX pass that only counts: it throws the 400 at the first level, value
// or container past the limits, before any tree is built. (nlohmann's
// callback parser would do it in one pass, but it scans an array for a
// discarded element at the end of each object in it: quadratic, 23 s for
// 100k chat messages under AddressSanitizer.)
class body_bounds {
public:
    explicit body_bounds(const request_limits & limits) : limits_(limits) {}

    bool null() { return value(); }
    bool boolean(bool) { return value(); }
    bool number_integer(nlohmann::json::number_integer_t) { return value(); }
    bool number_unsigned(nlohmann::json::number_unsigned_t) { return value(); }
    bool number_float(nlohmann::json::number_float_t, const std::string &) { return value(); }
    bool string(std::string &) { return value(); }
    bool binary(nlohmann::json::binary_t &) { return value(); }
    bool start_object(std::size_t) { return open(); }
    bool start_array(std::size_t) { return open(); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool key(std::string & k) {
        if (depth_ == 1) {
            field_ = k.substr(0, 64); // a known field's name is shorter
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) {
        throw invalid_request("the body is not valid JSON", "", "invalid_json");
    }

private:
    std::string where() const { return field_.empty() ? "the body" : "'" + field_ + "'"; }
    bool value() {
        if (++n_values_ > limits_.max_json_values) {
            throw invalid_request("the body has more than " + std::to_string(limits_.max_json_values) + " values (" + where() +
                                      " passed the bound)",
                                  field_, "json_too_large");
        }
        return true;
    }
    bool open() {
        if (++depth_ > limits_.max_json_depth) {
            throw invalid_request(where() + " nests arrays and objects deeper than " + std::to_string(limits_.max_json_depth) +
                                      " levels (the body is the first)",
                                  field_, "json_too_deep");
        }
        if (++n_containers_ > limits_.max_json_containers) {
            throw invalid_request("the body has more than " + std::to_string(limits_.max_json_containers) +
                                      " arrays and objects (" + where() + " passed the bound)",
                                  field_, "json_too_large");
        }
        return value();
    }
    bool close() {
        --depth_;
        return true;
    }

    const request_limits & limits_;
    std::string            field_; // the top-level key being read
    size_t                 depth_ = 0;
    size_t                 n_values_ = 0;
    size_t                 n_containers_ = 0;
};

} // namespace

nlohmann::json parse_json_body(std::string_view body, const request_limits & limits) {
    body_bounds bounds(limits);
    nlohmann::json::sax_parse(body.begin(), body.end(), &bounds); // throws the 400s
    return nlohmann::json::parse(body.begin(), body.end()); // within the bounds, and valid: the tree
}

size_t json_text_depth(std::string_view text) {
    size_t depth = 0;
    size_t deepest = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '"') {
            for (++i; i < text.size() && text[i] != '"'; ++i) {
                i += text[i] == '\\' ? 1 : 0;
            }
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

parsed_request parse_request(endpoint kind, std::string_view body, const request_limits & limits) {
    json j = parse_json_body(body, limits);
    if (!j.is_object()) {
        throw invalid_request(std::string("the body must be a JSON object, not ") + type_name(j), "", "invalid_json");
    }
    parsed_request r;
    r.kind = kind;

    if (const auto it = j.find("model"); it != j.end() && !it->is_null()) {
        if (!it->is_string()) {
            throw wrong_type("model", "a string", *it);
        }
        r.model = it->get<std::string>();
        if (limits.strict_model && !r.model.empty() && r.model != limits.model_id &&
            std::find(limits.model_aliases.begin(), limits.model_aliases.end(), r.model) == limits.model_aliases.end()) {
            throw api_error(404, "invalid_request_error",
                            "The model '" + r.model + "' does not exist; this server serves '" + limits.model_id + "'", "model",
                            "model_not_found");
        }
    }
    if (kind == endpoint::completions) {
        const auto it = j.find("prompt");
        if (it == j.end() || it->is_null()) {
            throw invalid_request("'prompt' is required", "prompt", "missing_field");
        }
        const json & p = *it;
        // One prompt: a text, or token ids with or without text between them
        // (within a prompt object, texts alone too: llama-server's
        // tokenize_mixed joins their tokens).
        const auto parts_of = [](const json & x, bool texts_alone) {
            parsed_request::completion_prompt out;
            if (x.is_string()) {
                out.text = x.get<std::string>();
                return out;
            }
            if (!x.is_array() || x.empty() ||
                (!texts_alone && std::none_of(x.begin(), x.end(), [](const json & y) { return y.is_number_integer(); }))) {
                throw invalid_request("'prompt' holds " + describe(x) +
                                          "; a prompt is a text, a list of token ids (and texts), or {\"prompt_string\": ...}",
                                      "prompt", "invalid_type");
            }
            for (const json & y : x) {
                if (y.is_number_integer() && y.get<int64_t>() >= 0 && y.get<int64_t>() <= std::numeric_limits<int32_t>::max()) {
                    out.parts.push_back({static_cast<llama_token>(y.get<int64_t>()), ""});
                } else if (y.is_string()) {
                    out.parts.push_back({-1, y.get<std::string>()});
                    out.text += y.get_ref<const std::string &>();
                } else {
                    throw invalid_request("'prompt' holds " + describe(y) + "; a prompt of tokens holds token ids (and text)",
                                          "prompt", "invalid_type");
                }
            }
            return out;
        };
        // llama-server's prompt object: {"prompt_string": a prompt, "multimodal_data": [base64...]}.
        const auto one = [&](const json & x) {
            if (!x.is_object()) {
                return parts_of(x, false);
            }
            const auto text = x.find("prompt_string");
            if (text == x.end()) {
                throw invalid_request("'prompt' holds an object without 'prompt_string'; a prompt object is {\"prompt_string\": "
                                      "text or token ids}",
                                      "prompt", "invalid_type");
            }
            if (const auto mm = x.find("multimodal_data");
                mm != x.end() && !(mm->is_null() || ((mm->is_array() || mm->is_string()) && mm->empty()))) {
                throw invalid_request("'prompt' holds multimodal_data; this server serves text models only (no images or audio)",
                                      "prompt", "unsupported_parameter");
            }
            return parts_of(*text, true);
        };
        if (p.is_string() || p.is_object() ||
            (p.is_array() && std::any_of(p.begin(), p.end(), [](const json & x) { return x.is_number_integer(); }))) {
            r.prompts.push_back(one(p));
        } else if (p.is_array() && !p.empty()) {
            if (p.size() > limits.max_prompts) {
                throw invalid_request("'prompt' holds " + std::to_string(p.size()) + " prompts; this server answers at most " +
                                          std::to_string(limits.max_prompts) + " in one request",
                                      "prompt");
            }
            for (const json & x : p) { // several prompts
                r.prompts.push_back(one(x));
            }
        } else {
            throw wrong_type("prompt", "a string, token ids, or a list of them", *it);
        }
    } else {
        r.messages = parse_messages(j, limits);
    }
    if (const auto it = j.find("stream"); it != j.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            throw wrong_type("stream", "a boolean", *it);
        }
        r.stream = it->get<bool>();
    }
    refuse_unimplemented(j);
    r.n = static_cast<uint32_t>(integer_in(j, "n", 1, 1, std::numeric_limits<int32_t>::max()));
    if (r.n > limits.n_slots) {
        throw invalid_request("'n' is " + std::to_string(r.n) + "; this server runs at most " + std::to_string(limits.n_slots) +
                                  " completions side by side (--parallel), which is the most choices one request can have",
                              "n");
    }
    constexpr int64_t max_tokens_cap = int64_t(1) << 24;
    bool given = false;
    r.max_tokens = static_cast<int32_t>(integer_in(j, "max_tokens", -1, 0, max_tokens_cap, &given));
    if (!given) { // the chat API's newer name
        r.max_tokens = static_cast<int32_t>(integer_in(j, "max_completion_tokens", -1, 0, max_tokens_cap));
    }
    r.temperature = number_in(j, "temperature", 1.0f, 0.0, 2.0, false, false);
    r.top_p = number_in(j, "top_p", 1.0f, 0.0, 1.0, true, false);
    r.min_p = number_in(j, "min_p", 0.0f, 0.0, 1.0, false, true);
    r.top_k = static_cast<int32_t>(integer_in(j, "top_k", 0, 0, std::numeric_limits<int32_t>::max()));
    const int64_t seed = integer_in(j, "seed", -1, -1, std::numeric_limits<uint32_t>::max(), &given);
    if (given && seed >= 0) {
        r.seed = static_cast<uint32_t>(seed);
    }
    if (const auto it = j.find("speculative_accept"); it != j.end() && !it->is_null()) {
        if (!it->is_string() || (*it != "exact" && *it != "rejection")) {
            throw wrong_type("speculative_accept", "\"exact\" or \"rejection\"", *it);
        }
        r.accept = *it == "exact" ? SPECDEC_ACCEPT_EXACT : SPECDEC_ACCEPT_REJECTION;
    }
    r.stop = parse_stop(j, limits);
    r.n_top_logprobs = parse_logprobs(j, kind);
    r.include_usage = parse_include_usage(j, r.stream);
    parse_logit_bias(j, r);
    r.presence_penalty = number_in(j, "presence_penalty", 0.0f, -2.0, 2.0, false, false);
    r.frequency_penalty = number_in(j, "frequency_penalty", 0.0f, -2.0, 2.0, false, false);
    r.repeat_penalty = number_in(j, "repeat_penalty", 1.0f, 0.0, 100.0, true, false);
    r.repeat_last_n = static_cast<int32_t>(integer_in(j, "repeat_last_n", 64, 0, std::numeric_limits<int32_t>::max()));
    if (const auto it = j.find("grammar"); it != j.end() && !it->is_null()) {
        if (!it->is_string()) {
            throw wrong_type("grammar", "a string (GBNF)", *it);
        }
        r.grammar = it->get<std::string>();
    }
    r.json_schema = parse_json_schema(j, body);
    if (r.json_schema) {
        const auto rf = j.find("response_format");
        r.json_schema_field = rf != j.end() && !rf->is_null() ? "response_format" : "json_schema";
    }
    if (const auto it = j.find("ignore_eos"); it != j.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            throw wrong_type("ignore_eos", "a boolean", *it);
        }
        r.ignore_eos = it->get<bool>();
    }
    if (const auto it = j.find("verbose"); it != j.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            throw wrong_type("verbose", "a boolean", *it);
        }
        r.verbose = it->get<bool>();
    }
    if (const auto it = j.find("echo"); it != j.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            throw wrong_type("echo", "a boolean", *it);
        }
        if (kind == endpoint::chat && it->get<bool>()) {
            throw invalid_request("'echo' belongs to completions, not chat completions", "echo");
        }
        r.echo = it->get<bool>();
        if (r.echo && r.stream && r.n_top_logprobs >= 0) {
            throw invalid_request("'echo' with 'logprobs' is answered whole only: send 'stream': false", "echo");
        }
    }
    if (r.json_schema && !r.grammar.empty()) {
        throw invalid_request("'grammar' and a JSON schema ('response_format' or 'json_schema') exclude each other", "grammar");
    }
    r.tools = parse_tools(j, kind, body);
    parse_thinking(j, kind, r);
    parse_continuation(j, kind, r);
    if (!r.tools.functions.empty() && r.tools.choice != tool_choice::none && (r.json_schema || !r.grammar.empty())) {
        const std::string field = r.grammar.empty() ? r.json_schema_field : "grammar";
        throw invalid_request(std::string("'") + field + "' cannot constrain an answer that may call tools (their calls follow "
                                  "the grammar of the model's tool-call format); send 'tool_choice': \"none\" with it",
                              field, "unsupported_parameter");
    }
    return r;
}

void resolve_logit_bias(parsed_request & r, const std::function<std::vector<llama_token>(const std::string &)> & tokenize,
                        const std::vector<llama_token> & eog) {
    if (!r.logit_bias_text.empty()) {
        std::vector<specdec_logit_bias> all;
        size_t next_text = 0;
        for (size_t i = 0; i <= r.logit_bias.size(); ++i) {
            for (; next_text < r.logit_bias_text.size() && r.logit_bias_text[next_text].at == i; ++next_text) {
                const parsed_request::bias_text & t = r.logit_bias_text[next_text];
                for (const llama_token token : tokenize(t.text)) {
                    all.push_back({token, t.bias});
                }
            }
            if (i < r.logit_bias.size()) {
                all.push_back(r.logit_bias[i]);
            }
        }
        r.logit_bias = std::move(all);
        r.logit_bias_text.clear();
    }
    if (r.ignore_eos) {
        for (const llama_token token : eog) {
            r.logit_bias.push_back({token, -INFINITY});
        }
    }
}

specdec::request_params to_engine_params(const parsed_request & r, int32_t n_ctx, uint32_t seed, int32_t n_draft,
                                         specdec_accept_mode accept) {
    specdec::request_params p = specdec_generate_default_params();
    p.n_predict = r.max_tokens >= 0 ? r.max_tokens : r.kind == endpoint::completions ? 16 : n_ctx;
    p.n_draft = n_draft;
    p.temperature = r.temperature;
    p.top_k = r.top_k;
    p.top_p = r.top_p;
    p.min_p = r.min_p;
    p.seed = r.seed.value_or(seed);
    p.accept = r.accept.value_or(accept);
    p.stop_strings = nullptr;
    p.n_stop_strings = 0;
    p.ignore_eog = r.ignore_eos;
    p.n_top_logprobs = r.n_top_logprobs;
    p.prompt_logprobs = r.echo && r.n_top_logprobs >= 0;
    p.logit_bias = r.logit_bias.empty() ? nullptr : r.logit_bias.data();
    p.n_logit_bias = r.logit_bias.size();
    p.presence_penalty = r.presence_penalty;
    p.frequency_penalty = r.frequency_penalty;
    p.repeat_penalty = r.repeat_penalty;
    p.repeat_last_n = r.repeat_last_n;
    p.grammar = r.grammar.empty() ? nullptr : r.grammar.c_str();
    p.grammar_triggers = r.grammar_triggers.empty() ? nullptr : r.grammar_triggers.data();
    p.n_grammar_triggers = r.grammar_triggers.size();
    p.grammar_prefix = r.grammar_prefix.empty() ? nullptr : r.grammar_prefix.c_str();
    if (!r.reasoning_end.empty()) {
        p.reasoning_start = r.reasoning_start.c_str();
        p.reasoning_end = r.reasoning_end.c_str();
        p.reasoning_budget = r.reasoning_budget.value_or(-1);
        p.reasoning_budget_message = r.reasoning_budget_message ? r.reasoning_budget_message->c_str() : nullptr;
        p.reasoning_prefix = r.reasoning_prefix.empty() ? nullptr : r.reasoning_prefix.c_str();
    }
    return p;
}

namespace {

constexpr std::pair<reasoning_format, const char *> reasoning_names[] = {
    {reasoning_format::none, "none"},
    {reasoning_format::automatic, "auto"},
    {reasoning_format::deepseek, "deepseek"},
    {reasoning_format::deepseek_legacy, "deepseek-legacy"},
};

} // namespace

std::optional<reasoning_format> reasoning_format_from_name(const std::string & name) {
    for (const auto & [f, n] : reasoning_names) {
        if (name == n) {
            return f;
        }
    }
    return std::nullopt;
}

const char * reasoning_format_name(reasoning_format f) {
    for (const auto & [g, n] : reasoning_names) {
        if (g == f) {
            return n;
        }
    }
    return "auto";
}

chat_options chat_options_for(const parsed_request & r, const chat_options & server) {
    chat_options o = server;
    o.reasoning = r.reasoning.value_or(server.reasoning);
    for (const auto & [name, value] : r.template_kwargs) {
        o.template_kwargs[name] = value;
    }
    if (r.enable_thinking) {
        o.enable_thinking = *r.enable_thinking;
    } else if (const auto it = server.template_kwargs.find("enable_thinking"); it != server.template_kwargs.end()) {
        o.enable_thinking = it->second == "true";
    }
    o.stream = r.stream;
    o.add_generation_prompt = r.add_generation_prompt.value_or(true);
    o.continue_final = r.continue_final.value_or(continuation::none);
    const bool ends_with_assistant = !r.messages.empty() && r.messages.back().role == "assistant";
    if (!r.continue_final && server.prefill_assistant && ends_with_assistant) {
        if (r.messages.size() >= 2 && r.messages[r.messages.size() - 2].role == "assistant") {
            throw invalid_request("the conversation ends with two assistant messages; only the last one can be continued",
                                  "messages");
        }
        o.continue_final = continuation::automatic;
        o.add_generation_prompt = false;
    }
    if (o.continue_final != continuation::none) {
        if (o.add_generation_prompt) {
            throw invalid_request("'add_generation_prompt' true opens a new assistant turn, and 'continue_final_message' "
                                  "continues the last message: send one of them",
                                  "add_generation_prompt");
        }
        if (!ends_with_assistant) {
            throw invalid_request("'continue_final_message' continues the last message, which must be the assistant's",
                                  "continue_final_message");
        }
        if (!r.messages.back().tool_calls.empty()) {
            throw invalid_request("the last message calls tools: an assistant message with tool calls cannot be continued",
                                  "messages");
        }
    }
    o.reasoning_budget = r.reasoning_budget.value_or(server.reasoning_budget);
    o.reasoning_budget_message = r.reasoning_budget_message.value_or(server.reasoning_budget_message);
    return o;
}

const char * finish_reason(specdec_stop_reason stop) {
    switch (stop) {
        case SPECDEC_STOP_EOG:
        case SPECDEC_STOP_STRING:
            return "stop";
        case SPECDEC_STOP_BUDGET:
        case SPECDEC_STOP_CONTEXT:
            return "length";
        default:
            return nullptr;
    }
}

namespace {

// "tool_calls" when the answer ended by itself having called a function.
json finish_reason_json(specdec_stop_reason stop, const parsed_answer * answer = nullptr) {
    if (answer != nullptr && !answer->tool_calls.empty() && (stop == SPECDEC_STOP_EOG || stop == SPECDEC_STOP_STRING)) {
        return "tool_calls";
    }
    const char * r = finish_reason(stop);
    return r != nullptr ? json(r) : json();
}

json tool_calls_body(const std::vector<tool_call> & calls) {
    json out = json::array();
    for (const tool_call & c : calls) {
        out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    return out;
}

// The assistant's message: its text, or what its answer reads as (content
// null when it only calls functions).
json message_body(const response_info & info, const std::string & text) {
    if (info.answer == nullptr) {
        return {{"role", "assistant"}, {"content", text}};
    }
    const parsed_answer & a = *info.answer;
    json m = {{"role", "assistant"}, {"content", a.content.empty() && !a.tool_calls.empty() ? json() : json(a.content)}};
    if (!a.reasoning_content.empty()) {
        m["reasoning_content"] = a.reasoning_content;
    }
    if (!a.tool_calls.empty()) {
        m["tool_calls"] = tool_calls_body(a.tool_calls);
    }
    return m;
}

// OpenAI's backend identifier, in llama-server's form "b<build>-<commit>":
// specdec's version and the pinned llama.cpp commit.
const std::string & system_fingerprint() {
    static const std::string fp = std::string("b") + specdec_version() + "-" + std::string(specdec_llama_commit()).substr(0, 7);
    return fp;
}

json envelope(const response_info & info, bool chunk) {
    const char * object = info.kind == endpoint::completions ? "text_completion" : chunk ? "chat.completion.chunk" : "chat.completion";
    return {{"id", info.id}, {"object", object}, {"created", info.created}, {"model", info.model},
            {"system_fingerprint", system_fingerprint()}};
}

} // namespace

json stats_body(const response_info & info, const finished_request & f) {
    const auto & out = f.result->output;
    const auto & st = out.stats;
    json by_pos = json::array();
    json drafts_at = json::array();
    json accepted_at = json::array();
    for (size_t i = 0; i < SPECDEC_MAX_DRAFT && st.n_proposed_at[i] > 0; ++i) {
        by_pos.push_back(static_cast<double>(st.n_accepted_at[i]) / static_cast<double>(std::max<uint64_t>(st.n_reached_at[i], 1)));
        drafts_at.push_back(st.n_proposed_at[i]);
        accepted_at.push_back(st.n_accepted_at[i]);
    }
    const auto ms = [](int64_t us) { return us < 0 ? json() : json(static_cast<double>(us) / 1e3); };
    return {
        {"strategy", info.strategy},
        {"accept", info.accept},
        {"tokens", out.tokens},
        {"steps", st.n_steps},
        {"drafted", st.n_drafted},
        {"accepted", st.n_accepted},
        {"acceptance_rate", st.n_drafted > 0 ? static_cast<double>(st.n_accepted) / static_cast<double>(st.n_drafted) : 0.0},
        {"drafts_by_position", drafts_at},
        {"accepted_by_position", accepted_at},
        {"acceptance_by_position", by_pos},
        {"time_to_first_token_ms", ms(f.result->times.t_first_token_us)},
        {"total_ms", ms(f.result->times.t_total_us)},
    };
}

json usage_body(const std::vector<finished_request> & fs, size_t n) {
    size_t n_prompt = 0, n_cached = 0, n_out = 0;
    for (size_t i = 0; i < fs.size(); ++i) {
        if (i % std::max<size_t>(n, 1) == 0) {
            n_prompt += fs[i].n_prompt;
            n_cached += fs[i].result->n_prompt_cached;
        }
        n_out += fs[i].result->output.tokens.size();
    }
    return {{"prompt_tokens", n_prompt},
            {"completion_tokens", n_out},
            {"total_tokens", n_prompt + n_out},
            {"prompt_tokens_details", {{"cached_tokens", n_cached}}}};
}

token_logprobs token_logprobs::of(const specdec::sequence_result & out) {
    return {out.tokens, out.logprobs, out.top_logprobs};
}

namespace {

json bytes_of(const std::string & piece) {
    json b = json::array();
    for (const unsigned char c : piece) {
        b.push_back(c);
    }
    return b;
}

} // namespace

json logprobs_body(const response_info & info, const token_logprobs & lp, size_t & text_offset) {
    const auto n_top = static_cast<size_t>(std::max(info.n_top_logprobs, 0));
    if (info.kind == endpoint::chat) {
        json content = json::array();
        for (size_t i = 0; i < lp.tokens.size(); ++i) {
            const std::string piece = info.piece(lp.tokens[i]);
            json top = json::array();
            for (size_t k = 0; k < n_top; ++k) {
                const specdec_token_logprob & a = lp.top[i * n_top + k];
                const std::string p = info.piece(a.token);
                top.push_back({{"token", p}, {"logprob", a.logprob}, {"bytes", bytes_of(p)}});
            }
            content.push_back({{"token", piece}, {"logprob", lp.logprobs[i]}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
            text_offset += piece.size();
        }
        return {{"content", content}};
    }
    json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
    for (size_t i = 0; i < lp.tokens.size(); ++i) {
        const std::string piece = info.piece(lp.tokens[i]);
        json top = json::object();
        for (size_t k = 0; k < n_top; ++k) {
            const specdec_token_logprob & a = lp.top[i * n_top + k];
            top[info.piece(a.token)] = a.logprob; // two tokens of the same text: the likelier one's (listed first)
        }
        tokens.push_back(piece);
        values.push_back(lp.logprobs[i]);
        tops.push_back(top);
        offsets.push_back(text_offset);
        text_offset += piece.size();
    }
    return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json echo_logprobs_body(const response_info & info, const specdec::sequence_result & out, size_t & text_offset) {
    const auto n_top = static_cast<size_t>(std::max(info.n_top_logprobs, 0));
    const std::vector<llama_token> & prompt = *info.echo_tokens;
    json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
    for (size_t i = 0; i < prompt.size(); ++i) {
        const std::string piece = info.piece(prompt[i]);
        tokens.push_back(piece);
        offsets.push_back(text_offset);
        text_offset += piece.size();
        if (i == 0 || i > out.prompt_logprobs.size()) { // the first token follows nothing
            values.push_back(nullptr);
            tops.push_back(nullptr);
            continue;
        }
        values.push_back(out.prompt_logprobs[i - 1]);
        json top = json::object();
        for (size_t k = 0; k < n_top && (i - 1) * n_top + k < out.prompt_top_logprobs.size(); ++k) {
            const specdec_token_logprob & a = out.prompt_top_logprobs[(i - 1) * n_top + k];
            top[info.piece(a.token)] = a.logprob;
        }
        tops.push_back(top);
    }
    return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json response_body(const response_info & info, const finished_request & f) {
    json j = envelope(info, false);
    json logprobs = nullptr;
    const bool echo = info.kind == endpoint::completions && info.echo_text != nullptr;
    if (info.n_top_logprobs >= 0) {
        size_t offset = 0;
        if (echo) {
            logprobs = echo_logprobs_body(info, f.result->output, offset);
            offset = info.echo_text->size(); // the answer's offsets count from the end of the prompt's text
            const json answer = logprobs_body(info, token_logprobs::of(f.result->output), offset);
            for (const char * k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
                logprobs[k].insert(logprobs[k].end(), answer[k].begin(), answer[k].end());
            }
        } else {
            logprobs = logprobs_body(info, token_logprobs::of(f.result->output), offset);
        }
    }
    json choice = {{"index", info.index}, {"logprobs", logprobs}, {"finish_reason", finish_reason_json(f.result->output.stop, info.answer)}};
    if (info.kind == endpoint::completions) {
        choice["text"] = echo ? *info.echo_text + f.result->output.text : f.result->output.text;
    } else {
        choice["message"] = message_body(info, f.result->output.text);
    }
    j["choices"] = json::array({choice});
    j["usage"] = usage_body({f}, 1);
    j["specdec"] = stats_body(info, f);
    return j;
}

json response_body(const std::vector<response_info> & infos, const std::vector<finished_request> & fs, size_t n) {
    json j = envelope(infos.front(), false);
    j["choices"] = json::array();
    j["specdec"] = json::array();
    for (size_t i = 0; i < fs.size(); ++i) {
        json one = response_body(infos[i], fs[i]);
        j["choices"].push_back(std::move(one["choices"][0]));
        j["specdec"].push_back(std::move(one["specdec"]));
    }
    j["usage"] = usage_body(fs, n);
    return j;
}

json role_chunk_body(const response_info & info) {
    json j = envelope(info, true);
    j["choices"] = json::array({{{"index", info.index},
                                 {"delta", {{"role", "assistant"}, {"content", nullptr}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
    if (info.include_usage) {
        j["usage"] = nullptr;
    }
    return j;
}

json chunk_body(const response_info & info, std::string_view piece, const json & logprobs) {
    json j = envelope(info, true);
    json choice = {{"index", info.index}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
    if (info.kind == endpoint::completions) {
        choice["text"] = piece;
    } else {
        choice["delta"] = json{{"content", piece}};
    }
    j["choices"] = json::array({choice});
    if (info.include_usage) {
        j["usage"] = nullptr;
    }
    return j;
}

std::string new_tool_call_id() {
    static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng(std::random_device{}());
    std::uniform_int_distribution<size_t> pick(0, sizeof(alphabet) - 2);
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) {
        id += alphabet[pick(rng)];
    }
    return id;
}

void name_tool_calls(parsed_answer & a) {
    for (tool_call & c : a.tool_calls) {
        if (c.id.empty()) {
            c.id = new_tool_call_id();
        }
    }
}

json answer_delta(answer_stream & s, const parsed_answer & a, bool partial) {
    json delta = json::object();
    const std::string & reasoning = a.reasoning_content;
    if (reasoning.size() > s.reasoning_sent.size() && reasoning.compare(0, s.reasoning_sent.size(), s.reasoning_sent) == 0) {
        delta["reasoning_content"] = reasoning.substr(s.reasoning_sent.size());
        s.reasoning_sent = reasoning;
    }
    const std::string & content = a.content;
    if (content.size() > s.content_sent.size() && content.compare(0, s.content_sent.size(), s.content_sent) == 0) {
        delta["content"] = content.substr(s.content_sent.size());
        s.content_sent = content;
    }
    json calls = json::array();
    for (size_t i = 0; i < a.tool_calls.size(); ++i) {
        const tool_call & c = a.tool_calls[i];
        if (i < s.calls.size()) {
            answer_stream::call & sent = s.calls[i];
            if (c.arguments.size() > sent.arguments_sent) {
                calls.push_back({{"index", i}, {"function", {{"arguments", c.arguments.substr(sent.arguments_sent)}}}});
                sent.arguments_sent = c.arguments.size();
            }
            continue;
        }
        const bool whole_name = !c.arguments.empty() || i + 1 < a.tool_calls.size() || !partial;
        if (i > s.calls.size() || !whole_name || c.name.empty()) {
            break; // calls open in order
        }
        s.calls.push_back({c.id.empty() ? new_tool_call_id() : c.id, c.arguments.size()});
        calls.push_back({{"index", i},
                         {"id", s.calls.back().id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    if (!calls.empty()) {
        delta["tool_calls"] = std::move(calls);
    }
    return delta;
}

json delta_chunk_body(const response_info & info, json delta, const json & logprobs) {
    json j = envelope(info, true);
    j["choices"] = json::array({{{"index", info.index}, {"delta", std::move(delta)}, {"logprobs", logprobs}, {"finish_reason", nullptr}}});
    if (info.include_usage) {
        j["usage"] = nullptr;
    }
    return j;
}

json final_chunk_body(const response_info & info, const finished_request & f) {
    json j = envelope(info, true);
    json choice = {{"index", info.index}, {"logprobs", nullptr}, {"finish_reason", finish_reason_json(f.result->output.stop, info.answer)}};
    if (info.kind == endpoint::completions) {
        choice["text"] = "";
    } else {
        choice["delta"] = json::object();
    }
    j["choices"] = json::array({choice});
    if (info.include_usage) {
        j["usage"] = nullptr;
    }
    j["specdec"] = stats_body(info, f);
    return j;
}

json usage_chunk_body(const response_info & info, const std::vector<finished_request> & fs, size_t n) {
    json j = envelope(info, true);
    j["choices"] = json::array();
    j["usage"] = usage_body(fs, n);
    return j;
}

std::string sse_event(const json & j) {
    return "data: " + json_text(j, -1) + "\n\n";
}

std::string typed_sse_event(const json & j) {
    return "event: " + j.at("type").get<std::string>() + "\ndata: " + json_text(j, -1) + "\n\n";
}

std::string_view sse_done() {
    return "data: [DONE]\n\n";
}

} // namespace cli::serve
