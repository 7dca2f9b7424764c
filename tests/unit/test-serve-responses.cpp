// `specdec serve`'s Responses API without a model or a socket: a request's
// translation into the chat request (every field, every item type, and a
// bad, unknown or unimplemented one refused with 400 naming it), the
// response object and its stream events.
#include "serve-responses.h"

#include <gtest/gtest.h>

#include <sstream>

namespace cli::serve {
namespace {

using nlohmann::json;

request_limits limits() {
    request_limits l;
    l.model_id = "tiny";
    l.n_ctx = 256;
    l.max_stop = 4;
    return l;
}

responses_request parse(const json & body) {
    return parse_responses_request(body.dump(), limits());
}

struct failure_info {
    int         status = 0;
    std::string param;
    std::string code;
    std::string message;
};

failure_info failure(const std::string & body) {
    try {
        parse_responses_request(body, limits());
    } catch (const api_error & e) {
        return {e.status(), e.param(), e.code(), e.what()};
    }
    return {};
}

failure_info failure(const json & body) {
    return failure(body.dump());
}

json base() {
    return {{"model", "gpt-anything"}, {"input", "hi"}};
}

TEST(ServeResponses, AStringInputIsOneUserMessage) {
    const responses_request r = parse(base());
    EXPECT_EQ(r.chat.kind, endpoint::chat);
    EXPECT_EQ(r.chat.model, "gpt-anything");
    ASSERT_EQ(r.chat.messages.size(), 1u);
    EXPECT_EQ(r.chat.messages[0].role, "user");
    EXPECT_EQ(r.chat.messages[0].content, "hi");
    EXPECT_EQ(r.chat.max_tokens, -1);
    EXPECT_FALSE(r.chat.stream);
    EXPECT_FALSE(r.encrypted_reasoning);
    // What the response repeats, OpenAI's defaults where not given.
    EXPECT_EQ(r.echo["instructions"], nullptr);
    EXPECT_EQ(r.echo["tools"], json::array());
    EXPECT_EQ(r.echo["tool_choice"], "auto");
    EXPECT_EQ(r.echo["parallel_tool_calls"], true);
    EXPECT_EQ(r.echo["temperature"], 1.0);
    EXPECT_EQ(r.echo["top_p"], 1.0);
    EXPECT_EQ(r.echo["text"], json({{"format", {{"type", "text"}}}}));
    EXPECT_EQ(r.echo["store"], false);
    EXPECT_EQ(r.echo["metadata"], json::object());
}

TEST(ServeResponses, TranslatesEveryField) {
    json b = base();
    b["instructions"] = "be brief";
    b["input"] = json::parse(R"([
        {"role": "developer", "content": "use tools"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather"}, {"type": "input_text", "text": "in Paris?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "look it up"}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "calling", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "noon"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "answer now"}]},
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "thanks"}
    ])");
    b["tools"] = json::parse(R"([{"type": "function", "name": "get_weather", "description": "the weather", "strict": true,
                                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
                                {"type": "function", "name": "get_time", "parameters": null, "strict": null}])");
    b["tool_choice"] = {{"type", "function"}, {"name", "get_weather"}};
    b["parallel_tool_calls"] = false;
    b["max_output_tokens"] = 9;
    b["temperature"] = 0.5;
    b["top_p"] = 0.9;
    b["stream"] = true;
    b["reasoning"] = {{"effort", "low"}, {"summary", "auto"}};
    b["include"] = {"reasoning.encrypted_content"};
    // What changes no token.
    b["metadata"] = {{"k", "v"}};
    b["store"] = true;
    b["stream_options"] = {{"include_obfuscation", false}};
    for (const char * key : {"user", "service_tier", "safety_identifier", "prompt_cache_key"}) {
        b[key] = "x";
    }
    b["background"] = false;
    b["truncation"] = "disabled";
    b["top_logprobs"] = 0;
    b["previous_response_id"] = nullptr; // null asks for nothing
    const responses_request r = parse(b);
    EXPECT_EQ(r.chat.max_tokens, 9);
    EXPECT_FLOAT_EQ(r.chat.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.chat.top_p, 0.9f);
    EXPECT_TRUE(r.chat.stream);
    EXPECT_TRUE(r.encrypted_reasoning);
    const std::vector<chat_message> & m = r.chat.messages;
    ASSERT_EQ(m.size(), 8u);
    EXPECT_EQ(m[0].role, "system");
    EXPECT_EQ(m[0].content, "be brief");
    EXPECT_EQ(m[1].role, "developer");
    EXPECT_EQ(m[1].content, "use tools");
    EXPECT_EQ(m[2].role, "user");
    EXPECT_EQ(m[2].content, "weather\nin Paris?");
    // Reasoning, text and both calls: one assistant turn.
    EXPECT_EQ(m[3].role, "assistant");
    EXPECT_EQ(m[3].reasoning_content, "look it up");
    EXPECT_EQ(m[3].content, "calling");
    ASSERT_EQ(m[3].tool_calls.size(), 2u);
    EXPECT_EQ(m[3].tool_calls[0].id, "call_1");
    EXPECT_EQ(m[3].tool_calls[0].name, "get_weather");
    EXPECT_EQ(m[3].tool_calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(m[3].tool_calls[1].id, "call_2");
    EXPECT_EQ(m[4].role, "tool");
    EXPECT_EQ(m[4].tool_call_id, "call_1");
    EXPECT_EQ(m[4].content, "sunny");
    EXPECT_EQ(m[5].tool_call_id, "call_2");
    EXPECT_EQ(m[5].content, "noon");
    // A reasoning item's summary when it has no content; the text after it joins it.
    EXPECT_EQ(m[6].role, "assistant");
    EXPECT_EQ(m[6].reasoning_content, "answer now");
    EXPECT_EQ(m[6].content, "It is sunny.");
    EXPECT_TRUE(m[6].tool_calls.empty());
    EXPECT_EQ(m[7].role, "user");
    ASSERT_EQ(r.chat.tools.functions.size(), 2u);
    EXPECT_EQ(r.chat.tools.functions[0].name, "get_weather");
    EXPECT_EQ(r.chat.tools.functions[0].description, "the weather");
    EXPECT_EQ(json::parse(r.chat.tools.functions[0].parameters), b["tools"][0]["parameters"]);
    EXPECT_EQ(r.chat.tools.choice, tool_choice::required);
    EXPECT_EQ(r.chat.tools.forced, "get_weather");
    EXPECT_EQ(r.chat.tools.parallel, false);
    EXPECT_EQ(r.chat.template_kwargs.at("reasoning_effort"), "\"low\"");
    EXPECT_EQ(r.echo["instructions"], "be brief");
    EXPECT_EQ(r.echo["tools"], b["tools"]);
    EXPECT_EQ(r.echo["tool_choice"], b["tool_choice"]);
    EXPECT_EQ(r.echo["max_output_tokens"], 9);
    EXPECT_EQ(r.echo["metadata"], json({{"k", "v"}}));
    EXPECT_EQ(r.echo["reasoning"], b["reasoning"]);
    EXPECT_EQ(r.echo["store"], false) << "nothing is stored";
}

TEST(ServeResponses, ToolChoicesFormatsAndEffort) {
    json tools = json::parse(R"([{"type": "function", "name": "f", "parameters": {"type": "object"}}])");
    for (const auto & [choice, want] : std::vector<std::pair<std::string, tool_choice>>{
             {"auto", tool_choice::automatic}, {"none", tool_choice::none}, {"required", tool_choice::required}}) {
        json b = base();
        b["tools"] = tools;
        b["tool_choice"] = choice;
        EXPECT_EQ(parse(b).chat.tools.choice, want) << choice;
    }
    // A schema's keys, and a tool's parameters', in the order sent (llama.cpp's grammar and the template follow it).
    const responses_request s = parse_responses_request(R"({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x",
        "strict": true, "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}}})",
                                                        limits());
    ASSERT_TRUE(s.chat.json_schema.has_value());
    EXPECT_EQ(*s.chat.json_schema, R"({"type":"object","properties":{"b":{},"a":{}}})");
    EXPECT_EQ(s.chat.json_schema_field, "response_format");
    const responses_request t = parse_responses_request(R"({"input": "hi",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"z": {}, "y": {}}}}]})", limits());
    EXPECT_EQ(t.chat.tools.functions[0].parameters, R"({"type":"object","properties":{"z":{},"y":{}}})");
    json b = base();
    b["text"] = {{"format", {{"type", "json_object"}}}, {"verbosity", "medium"}};
    EXPECT_EQ(parse(b).chat.json_schema, std::optional<std::string>(R"({"type": "object"})"));
    b["text"] = {{"format", {{"type", "text"}}}};
    EXPECT_FALSE(parse(b).chat.json_schema.has_value());
    b.erase("text");
    b["reasoning"] = {{"effort", "none"}};
    EXPECT_EQ(parse(b).chat.enable_thinking, std::optional<bool>(false));
}

TEST(ServeResponses, EncryptedReasoningIsReadBackOnlyWhenThisServerWroteIt) {
    json b = base();
    b["input"] = {{{"type", "reasoning"}, {"summary", json::array()}, {"encrypted_content", "specdec:thought"}},
                  {{"role", "assistant"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}};
    const responses_request r = parse(b);
    ASSERT_EQ(r.chat.messages.size(), 2u);
    EXPECT_EQ(r.chat.messages[0].reasoning_content, "thought");
    EXPECT_EQ(r.chat.messages[0].content, "a");
    b["input"][0]["encrypted_content"] = "gAAAAB-someone-else";
    const failure_info f = failure(b);
    EXPECT_EQ(f.status, 400);
    EXPECT_EQ(f.param, "input[0].encrypted_content");
}

TEST(ServeResponses, RefusesBadFieldsNamingThem) {
    const auto with = [](const char * key, json value) {
        json b = base();
        b[key] = std::move(value);
        return b;
    };
    const auto item = [](json it) {
        json b = base();
        b["input"] = json::array({std::move(it)});
        return b;
    };
    const std::vector<std::tuple<json, std::string, std::string>> cases = {
        // Not implemented: unsupported_parameter, naming the field.
        {with("previous_response_id", "resp_1"), "previous_response_id", "unsupported_parameter"},
        {with("conversation", "conv_1"), "conversation", "unsupported_parameter"},
        {with("background", true), "background", "unsupported_parameter"},
        {with("include", {"message.output_text.logprobs"}), "include[0]", "unsupported_parameter"},
        {with("include", {"reasoning.encrypted_content", "file_search_call.results"}), "include[1]", "unsupported_parameter"},
        {with("top_logprobs", 2), "top_logprobs", "unsupported_parameter"},
        {with("truncation", "auto"), "truncation", "unsupported_parameter"},
        {with("max_tool_calls", 3), "max_tool_calls", "unsupported_parameter"},
        {with("prompt", {{"id", "pmpt_1"}}), "prompt", "unsupported_parameter"},
        {with("context_management", {{{"type", "compaction"}}}), "context_management", "unsupported_parameter"},
        {with("frequency_penalty", 1), "frequency_penalty", "unsupported_parameter"},
        {with("tools", {{{"type", "web_search"}}}), "tools[0].type", "unsupported_parameter"},
        {with("tools", {{{"type", "function"}, {"name", "f"}, {"defer_loading", true}}}), "tools[0].defer_loading", "unsupported_parameter"},
        {with("tool_choice", {{"type", "allowed_tools"}, {"mode", "auto"}, {"tools", json::array()}}), "tool_choice", "unsupported_parameter"},
        {with("text", {{"verbosity", "low"}}), "text.verbosity", "unsupported_parameter"},
        {with("reasoning", {{"mode", "pro"}}), "reasoning.mode", "unsupported_parameter"},
        {item({{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "http://x"}}}}}), "input[0].content[0].type", "unsupported_parameter"},
        {item({{"role", "user"}, {"content", {{{"type", "input_file"}, {"file_id", "f"}}}}}), "input[0].content[0].type", "unsupported_parameter"},
        {item({{"type", "function_call_output"}, {"call_id", "c"}, {"output", {{{"type", "input_image"}}}}}), "input[0].output[0].type", "unsupported_parameter"},
        {item({{"type", "item_reference"}, {"id", "msg_1"}}), "input[0].type", "unsupported_parameter"},
        {item({{"type", "web_search_call"}, {"id", "ws_1"}}), "input[0].type", "unsupported_parameter"},
        // Bad values.
        {json{{"model", "x"}}, "input", "missing_field"},
        {with("input", 7), "input", "invalid_value"},
        {with("instructions", {"a"}), "instructions", "invalid_value"},
        {with("max_output_tokens", 0), "max_output_tokens", "invalid_value"},
        {with("temperature", 3), "temperature", "invalid_value"},
        {with("tool_choice", "any"), "tool_choice", "unsupported_parameter"},
        {with("text", {{"format", {{"type", "json_schema"}, {"name", "x"}}}}), "text.format.schema", "invalid_value"},
        {with("text", {{"format", {{"type", "yaml"}}}}), "text.format", "invalid_value"},
        {with("reasoning", {{"effort", 3}}), "reasoning.effort", "invalid_value"},
        {with("reasoning", {{"summary", "long"}}), "reasoning.summary", "invalid_value"},
        {item({{"role", "tool"}, {"content", "x"}}), "input[0].role", "invalid_value"},
        {item({{"role", "user"}}), "input[0].content", "invalid_value"},
        {item({{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}), "input[0].call_id", "invalid_value"},
        {item({{"type", "function_call_output"}, {"call_id", "c"}}), "input[0].output", "invalid_value"},
        {item({{"type", "reasoning"}, {"summary", "x"}}), "input[0].summary", "invalid_value"},
    };
    for (const auto & [body, param, code] : cases) {
        const failure_info f = failure(body);
        EXPECT_EQ(f.status, 400) << body.dump();
        EXPECT_EQ(f.param, param) << body.dump();
        EXPECT_EQ(f.code, code) << body.dump();
        EXPECT_NE(f.message.find(param.substr(0, param.find_first_of(".["))), std::string::npos) << f.message;
    }
    EXPECT_EQ(failure(with("model", "other")).status, 0) << "any model name is served by default";
    EXPECT_EQ(failure(std::string("[1]")).code, "invalid_json");
    EXPECT_EQ(failure(std::string("{")).code, "invalid_json");
}

// Every top-level field nested past the bounds: a 400 naming it (never a
// crash), and the same deep inside the places that hold values.
TEST(ServeResponses, DeepValuesAreRefusedNamingTheField) {
    std::string deep;
    for (int i = 0; i < 100000; ++i) {
        deep += '[';
    }
    deep += std::string(100000, ']');
    const std::vector<std::pair<std::string, std::string>> shapes = {
        {R"({"input": @})", "input"},
        {R"({"input": [{"role": "user", "content": @}]})", "input"},
        {R"({"input": [{"role": "user", "content": [{"type": "input_text", "text": @}]}]})", "input"},
        {R"({"input": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": @}]}]})", "input"},
        {R"({"input": [{"type": "function_call_output", "call_id": "c", "output": @}]})", "input"},
        {R"({"input": "a", "tools": [{"type": "function", "name": "f", "parameters": @}]})", "tools"},
        {R"({"input": "a", "tool_choice": {"type": "function", "name": @}})", "tool_choice"},
        {R"({"input": "a", "text": {"format": {"type": "json_schema", "name": "x", "schema": @}}})", "text"},
        {R"({"input": "a", "reasoning": {"effort": @}})", "reasoning"},
        {R"({"input": "a", "metadata": {"k": @}})", "metadata"},
        {R"({"input": "a", "include": @})", "include"},
        {R"({"input": "a", "previous_response_id": @})", "previous_response_id"},
        {R"({"input": "a", "instructions": @})", "instructions"},
        {R"({"input": "a", "unknown": @})", "unknown"},
    };
    for (const auto & [shape, field] : shapes) {
        std::string body = shape;
        body.replace(body.find('@'), 1, deep);
        const failure_info f = failure(body);
        EXPECT_EQ(f.status, 400) << shape;
        EXPECT_EQ(f.code, "json_too_deep") << shape;
        EXPECT_EQ(f.param, field) << shape;
    }
    // JSON text in a string (a call's arguments), which the template engine parses: bounded too.
    const failure_info f = failure(json{{"input", {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", deep}}}}});
    EXPECT_EQ(f.code, "json_too_deep");
    EXPECT_EQ(f.param, "input[0].arguments");
}

specdec::request_result result(specdec_stop_reason stop) {
    specdec::request_result r;
    r.output.tokens = {10, 11, 12};
    r.output.text = "raw";
    r.output.stop = stop;
    r.n_prompt_cached = 2;
    return r;
}

response_info info() {
    response_info i;
    i.kind = endpoint::chat;
    i.id = "resp_7";
    i.created = 1700000000;
    i.model = "tiny";
    i.strategy = "mtp";
    return i;
}

bool has_id(const json & v, const char * prefix) {
    const std::string s = v.get<std::string>();
    return s.rfind(prefix, 0) == 0 && s.size() == std::string(prefix).size() + 24;
}

TEST(ServeResponses, ItemsOfAnAnswer) {
    const std::vector<responses_item> items = responses_items_of({"hello", {{"", "f", "{}"}, {"call_x", "g", "[]"}}, "hmm"});
    ASSERT_EQ(items.size(), 4u);
    EXPECT_EQ(items[0].type, "reasoning");
    EXPECT_EQ(items[0].text, "hmm");
    EXPECT_TRUE(has_id(json(items[0].id), "rs_"));
    EXPECT_EQ(items[1].type, "message");
    EXPECT_EQ(items[1].text, "hello");
    EXPECT_TRUE(has_id(json(items[1].id), "msg_"));
    EXPECT_EQ(items[2].type, "function_call");
    EXPECT_EQ(items[2].name, "f");
    EXPECT_EQ(items[2].text, "{}");
    EXPECT_TRUE(has_id(json(items[2].id), "fc_"));
    EXPECT_TRUE(has_id(json(items[2].call_id), "call_"));
    EXPECT_EQ(items[3].call_id, "call_x");
    // Calls only: no message; nothing at all: one empty message.
    EXPECT_EQ(responses_items_of({"", {{"", "f", "{}"}}, ""}).size(), 1u);
    const std::vector<responses_item> empty = responses_items_of({"", {}, ""});
    ASSERT_EQ(empty.size(), 1u);
    EXPECT_EQ(empty[0].type, "message");
    EXPECT_EQ(empty[0].text, "");
}

TEST(ServeResponses, ReasoningTokensEndWithTheMarker) {
    const parsed_answer thinking{"ok", {}, "abc"};
    EXPECT_EQ(responses_reasoning_tokens(thinking, {"<t>", "ab", "c</", "t>", "o", "k"}, "</t>"), 4u);
    EXPECT_EQ(responses_reasoning_tokens(thinking, {"ab", "c", "</t>", "ok"}, "</t>"), 3u);
    EXPECT_EQ(responses_reasoning_tokens(thinking, {"ab", "c"}, "</t>"), 2u) << "cut short while thinking: all of them";
    EXPECT_EQ(responses_reasoning_tokens({"ok", {}, ""}, {"o", "k"}, "</t>"), 0u);
    EXPECT_EQ(responses_reasoning_tokens(thinking, {"o", "k"}, ""), 0u);
}

TEST(ServeResponses, ResponseObject) {
    const json echo = parse(base()).echo;
    const specdec::request_result done = result(SPECDEC_STOP_EOG);
    const std::vector<responses_item> items = {{"reasoning", "rs_1", "hmm", "", ""}, {"message", "msg_1", "hello", "", ""},
                                               {"function_call", "fc_1", R"({"a":1})", "f", "call_1"}};
    const json r = responses_body(info(), echo, false, {&done, 5}, items, 1);
    EXPECT_EQ(r["id"], "resp_7");
    EXPECT_EQ(r["object"], "response");
    EXPECT_EQ(r["created_at"], 1700000000);
    EXPECT_TRUE(r["completed_at"].is_number_integer());
    EXPECT_EQ(r["status"], "completed");
    EXPECT_EQ(r["error"], nullptr);
    EXPECT_EQ(r["incomplete_details"], nullptr);
    EXPECT_EQ(r["model"], "tiny");
    EXPECT_EQ(r["tool_choice"], "auto");
    EXPECT_EQ(r["store"], false);
    ASSERT_EQ(r["output"].size(), 3u);
    EXPECT_EQ(r["output"][0], json::parse(R"({"type": "reasoning", "id": "rs_1", "summary": [], "status": "completed",
                                               "content": [{"type": "reasoning_text", "text": "hmm"}]})"));
    EXPECT_EQ(r["output"][1], json::parse(R"({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                                               "content": [{"type": "output_text", "text": "hello", "annotations": [], "logprobs": []}]})"));
    EXPECT_EQ(r["output"][2], json::parse(R"({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                                               "arguments": "{\"a\":1}", "status": "completed"})"));
    EXPECT_EQ(r["usage"], json::parse(R"({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 3,
                                          "output_tokens_details": {"reasoning_tokens": 1}, "total_tokens": 8})"));
    EXPECT_EQ(r["specdec"]["tokens"], json({10, 11, 12}));
    // The budget or the context ended it: incomplete, and so is its last item.
    for (const specdec_stop_reason why : {SPECDEC_STOP_BUDGET, SPECDEC_STOP_CONTEXT}) {
        const specdec::request_result cut = result(why);
        const json i = responses_body(info(), echo, true, {&cut, 5}, items, 1);
        EXPECT_EQ(i["status"], "incomplete");
        EXPECT_EQ(i["incomplete_details"], json({{"reason", "max_output_tokens"}}));
        EXPECT_FALSE(i.contains("completed_at"));
        EXPECT_EQ(i["output"][1]["status"], "completed");
        EXPECT_EQ(i["output"][2]["status"], "incomplete");
        EXPECT_EQ(i["output"][0]["encrypted_content"], "specdec:hmm") << "include reasoning.encrypted_content";
    }
}

// A stream's events; each event's name equals its data's type, and the sequence numbers count from 0.
std::vector<json> events_of(const std::string & sse) {
    std::vector<json> out;
    std::istringstream in(sse);
    std::string line, name;
    while (std::getline(in, line)) {
        if (line.rfind("event: ", 0) == 0) {
            name = line.substr(7);
        } else if (line.rfind("data: ", 0) == 0) {
            json d = json::parse(line.substr(6));
            EXPECT_EQ(d["type"], name);
            EXPECT_EQ(d["sequence_number"], out.size());
            out.push_back(std::move(d));
        }
    }
    return out;
}

std::vector<std::string> types_of(const std::vector<json> & events) {
    std::vector<std::string> out;
    for (const json & e : events) {
        out.push_back(e["type"]);
    }
    return out;
}

TEST(ServeResponses, StreamEvents) {
    const response_info i = info();
    responses_stream s;
    s.echo = parse(base()).echo;
    std::string sse = responses_stream_start(s, i);
    sse += responses_stream_events(s, {"", {}, "thi"}, true);
    sse += responses_stream_events(s, {"", {}, "think"}, true);
    sse += responses_stream_events(s, {"Hi", {}, "think"}, true);
    sse += responses_stream_events(s, {"Hi", {{"", "f", ""}}, "think"}, true); // the name may not be whole yet
    sse += responses_stream_events(s, {"Hi", {{"", "f", "{\"a\":"}}, "think"}, true);
    sse += responses_stream_events(s, {"Hi", {{"", "f", "{\"a\":1}"}}, "think"}, false);
    EXPECT_EQ(responses_stream_events(s, {"Hi", {{"", "f", "{\"a\":1}"}}, "think"}, false), ""); // nothing new
    const specdec::request_result r = result(SPECDEC_STOP_EOG);
    sse += responses_stream_end(s, i, {&r, 5}, 2);
    const std::vector<json> e = events_of(sse);
    EXPECT_EQ(types_of(e), (std::vector<std::string>{
                               "response.created", "response.in_progress",
                               "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
                               "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
                               "response.output_item.done",
                               "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                               "response.output_text.done", "response.content_part.done", "response.output_item.done",
                               "response.output_item.added", "response.function_call_arguments.delta",
                               "response.function_call_arguments.delta", "response.function_call_arguments.done",
                               "response.output_item.done", "response.completed"}));
    EXPECT_EQ(e[0]["response"]["status"], "in_progress");
    EXPECT_EQ(e[0]["response"]["output"], json::array());
    EXPECT_EQ(e[0]["response"]["usage"], nullptr);
    EXPECT_EQ(e[0]["response"]["id"], "resp_7");
    const json & rs = e[2]["item"];
    EXPECT_EQ(rs["type"], "reasoning");
    EXPECT_EQ(rs["content"], json::array());
    EXPECT_EQ(e[2]["output_index"], 0);
    EXPECT_EQ(e[3]["part"], json({{"type", "reasoning_text"}, {"text", ""}}));
    EXPECT_EQ(e[4]["delta"], "thi");
    EXPECT_EQ(e[4]["item_id"], rs["id"]);
    EXPECT_EQ(e[5]["delta"], "nk");
    EXPECT_EQ(e[6]["text"], "think");
    EXPECT_EQ(e[8]["item"]["content"][0]["text"], "think");
    const json & msg = e[9]["item"];
    EXPECT_EQ(msg["type"], "message");
    EXPECT_EQ(msg["status"], "in_progress");
    EXPECT_EQ(e[9]["output_index"], 1);
    EXPECT_EQ(e[10]["part"], json({{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}}));
    EXPECT_EQ(e[11]["delta"], "Hi");
    EXPECT_EQ(e[11]["content_index"], 0);
    EXPECT_EQ(e[12]["text"], "Hi");
    EXPECT_EQ(e[14]["item"]["status"], "completed");
    const json & call = e[15]["item"];
    EXPECT_EQ(call["type"], "function_call");
    EXPECT_EQ(call["name"], "f");
    EXPECT_EQ(call["arguments"], "");
    EXPECT_TRUE(has_id(call["call_id"], "call_"));
    EXPECT_EQ(e[16]["delta"], "{\"a\":");
    EXPECT_EQ(e[17]["delta"], "1}");
    EXPECT_EQ(e[18]["arguments"], "{\"a\":1}");
    EXPECT_EQ(e[18]["name"], "f");
    EXPECT_EQ(e[19]["item"]["call_id"], call["call_id"]);
    const json & done = e[20]["response"];
    EXPECT_EQ(done["status"], "completed");
    ASSERT_EQ(done["output"].size(), 3u);
    EXPECT_EQ(done["output"][0], e[8]["item"]);
    EXPECT_EQ(done["output"][1], e[14]["item"]);
    EXPECT_EQ(done["output"][2], e[19]["item"]);
    EXPECT_EQ(done["usage"]["output_tokens_details"]["reasoning_tokens"], 2);
}

TEST(ServeResponses, StreamEndsIncompleteOrFailed) {
    const response_info i = info();
    responses_stream s;
    std::string sse = responses_stream_start(s, i);
    sse += responses_stream_events(s, {"abc", {}, ""}, true);
    const specdec::request_result r = result(SPECDEC_STOP_BUDGET);
    sse += responses_stream_end(s, i, {&r, 5}, 0);
    const std::vector<json> e = events_of(sse);
    ASSERT_EQ(e.size(), 9u);
    EXPECT_EQ(e[7]["item"]["status"], "incomplete");
    EXPECT_EQ(e[8]["type"], "response.incomplete");
    EXPECT_EQ(e[8]["response"]["incomplete_details"], json({{"reason", "max_output_tokens"}}));
    EXPECT_EQ(e[8]["response"]["output"][0]["content"][0]["text"], "abc");
    // Nothing written: one empty message, as a whole response's.
    responses_stream quiet;
    const specdec::request_result eog = result(SPECDEC_STOP_EOG);
    std::string quiet_sse = responses_stream_start(quiet, i);
    quiet_sse += responses_stream_end(quiet, i, {&eog, 5}, 0);
    const std::vector<json> q = events_of(quiet_sse);
    EXPECT_EQ(q.back()["response"]["output"], json::array({q[q.size() - 2]["item"]}));
    EXPECT_EQ(q.back()["response"]["output"][0]["content"][0]["text"], "");
    // A failure once begun: an error event, then response.failed.
    responses_stream failed;
    std::string f = responses_stream_start(failed, i);
    f += responses_stream_events(failed, {"ab", {}, ""}, true);
    f += responses_stream_failure(failed, i, api_error(503, "unavailable_error", "shutting down", "", "shutting_down"));
    const std::vector<json> fe = events_of(f);
    ASSERT_GE(fe.size(), 2u);
    EXPECT_EQ(fe[fe.size() - 2], json({{"type", "error"}, {"code", "shutting_down"}, {"message", "shutting down"}, {"param", nullptr},
                                       {"sequence_number", fe.size() - 2}}));
    EXPECT_EQ(fe.back()["type"], "response.failed");
    EXPECT_EQ(fe.back()["response"]["status"], "failed");
    EXPECT_EQ(fe.back()["response"]["error"], json({{"code", "server_error"}, {"message", "shutting down"}}));
    EXPECT_EQ(fe.back()["response"]["output"][0]["content"][0]["text"], "ab");
}

} // namespace
} // namespace cli::serve
