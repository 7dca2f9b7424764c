// `specdec serve`'s Anthropic Messages API without a model or a socket: a
// request's translation into the chat request (every field, and a bad or
// unknown one refused with 400 naming it), its error shape, the message and
// its stream events.
#include "serve-anthropic.h"

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

parsed_request parse(const json & body, bool count_tokens = false) {
    return parse_anthropic_request(body.dump(), limits(), count_tokens);
}

// The status and param of the api_error that parsing `body` throws (0 if none).
std::pair<int, std::string> failure(const json & body) {
    try {
        parse(body);
    } catch (const api_error & e) {
        return {e.status(), e.param()};
    }
    return {0, ""};
}

json base() {
    return {{"model", "claude-anything"}, {"max_tokens", 8}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
}

TEST(ServeAnthropic, TranslatesEveryField) {
    json b = base();
    b["system"] = json::array({{{"type", "text"}, {"text", "be brief"}}, {{"type", "text"}, {"text", "and kind"}}});
    b["messages"] = {{{"role", "user"}, {"content", "weather?"}},
                     {{"role", "assistant"},
                      {"content",
                       {{{"type", "thinking"}, {"thinking", "look it up"}, {"signature", "x"}},
                        {{"type", "text"}, {"text", "calling"}},
                        {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}}}},
                     {{"role", "user"},
                      {"content",
                       {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}},
                        {{"type", "tool_result"}, {"tool_use_id", "toolu_2"}, {"content", {{{"type", "text"}, {"text", "no"}}}}, {"is_error", true}},
                        {{"type", "text"}, {"text", "thanks"}}}}}};
    b["stop_sequences"] = {"END", "\n\n"};
    b["temperature"] = 0.5;
    b["top_p"] = 0.9;
    b["top_k"] = 40;
    b["stream"] = true;
    b["tools"] = json::parse(R"([{"name": "get_weather", "description": "the weather",
                                 "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}])");
    b["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}};
    b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 100}};
    b["metadata"] = {{"user_id", "u"}};
    const parsed_request r = parse(b);
    EXPECT_EQ(r.kind, endpoint::chat);
    EXPECT_EQ(r.model, "claude-anything");
    EXPECT_EQ(r.max_tokens, 8);
    EXPECT_TRUE(r.stream);
    EXPECT_FLOAT_EQ(r.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.top_p, 0.9f);
    EXPECT_EQ(r.top_k, 40);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"END", "\n\n"}));
    ASSERT_EQ(r.messages.size(), 6u);
    EXPECT_EQ(r.messages[0].role, "system");
    EXPECT_EQ(r.messages[0].content, "be brief\nand kind");
    EXPECT_EQ(r.messages[2].role, "assistant");
    EXPECT_EQ(r.messages[2].content, "calling");
    EXPECT_EQ(r.messages[2].reasoning_content, "look it up");
    ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
    EXPECT_EQ(r.messages[2].tool_calls[0].id, "toolu_1");
    EXPECT_EQ(r.messages[2].tool_calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.messages[2].tool_calls[0].arguments), json({{"city", "Paris"}}));
    EXPECT_EQ(r.messages[3].role, "tool");
    EXPECT_EQ(r.messages[3].tool_call_id, "toolu_1");
    EXPECT_EQ(r.messages[3].content, "sunny");
    EXPECT_EQ(r.messages[4].content, "Error: no");
    EXPECT_EQ(r.messages[5].role, "user");
    EXPECT_EQ(r.messages[5].content, "thanks");
    ASSERT_EQ(r.tools.functions.size(), 1u);
    EXPECT_EQ(r.tools.functions[0].description, "the weather");
    EXPECT_EQ(json::parse(r.tools.functions[0].parameters), b["tools"][0]["input_schema"]);
    // The schema's keys keep the order they were sent in (the template prints them).
    const parsed_request raw = parse_anthropic_request(
        R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"b": {}, "a": {}}}}]})",
        limits());
    EXPECT_EQ(raw.tools.functions[0].parameters, R"({"type":"object","properties":{"b":{},"a":{}}})");
    EXPECT_EQ(r.tools.choice, tool_choice::required);
    EXPECT_EQ(r.tools.forced, "get_weather");
    EXPECT_EQ(r.tools.parallel, std::optional<bool>(false));
    EXPECT_EQ(r.enable_thinking, std::optional<bool>(true));
    EXPECT_EQ(r.reasoning_budget, std::optional<int32_t>(100));
}

TEST(ServeAnthropic, ToolChoicesAndThinkingDisabled) {
    json b = base();
    b["tools"] = {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}};
    for (const auto & [type, want] : {std::pair<const char *, tool_choice>{"auto", tool_choice::automatic},
                                      {"any", tool_choice::required},
                                      {"none", tool_choice::none}}) {
        b["tool_choice"] = {{"type", type}};
        EXPECT_EQ(parse(b).tools.choice, want) << type;
    }
    b["thinking"] = {{"type", "disabled"}};
    EXPECT_EQ(parse(b).enable_thinking, std::optional<bool>(false));
    const parsed_request plain = parse(base());
    EXPECT_FALSE(plain.enable_thinking.has_value()); // the server's default
    EXPECT_TRUE(plain.stop.empty());
    EXPECT_EQ(plain.messages.size(), 1u);
}

TEST(ServeAnthropic, CountTokensNeedsNoMaxTokens) {
    json b = base();
    b.erase("max_tokens");
    EXPECT_EQ(failure(b), std::make_pair(400, std::string("max_tokens")));
    EXPECT_EQ(parse(b, true).messages.size(), 1u);
}

TEST(ServeAnthropic, RefusesBadFieldsNamingThem) {
    const auto with = [](const char * key, const json & v) {
        json b = base();
        b[key] = v;
        return b;
    };
    const auto message = [](const json & content, const char * role = "user") {
        json b = base();
        b["messages"] = {{{"role", role}, {"content", content}}};
        return b;
    };
    EXPECT_EQ(failure(with("max_tokens", 0)).second, "max_tokens");
    EXPECT_EQ(failure(with("max_tokens", "8")).second, "max_tokens");
    EXPECT_EQ(failure(with("temperature", 1.5)).second, "temperature");
    EXPECT_EQ(failure(with("top_p", 0)).second, "top_p");
    EXPECT_EQ(failure(with("top_k", -1)).second, "top_k");
    EXPECT_EQ(failure(with("stream", "yes")).second, "stream");
    EXPECT_EQ(failure(with("stop_sequences", "END")).second, "stop_sequences");
    EXPECT_EQ(failure(with("stop_sequences", {""})).second, "stop");
    EXPECT_EQ(failure(with("system", 3)).second, "system");
    EXPECT_EQ(failure(with("system", {{{"type", "image"}}})).second, "system[0]");
    EXPECT_EQ(failure(with("messages", json::array())).second, "messages");
    EXPECT_EQ(failure(with("tool_choice", "auto")).second, "tool_choice");
    EXPECT_EQ(failure(with("tool_choice", {{"type", "some"}})).second, "tool_choice.type");
    EXPECT_EQ(failure(with("tool_choice", {{"type", "tool"}})).second, "tool_choice.name");
    EXPECT_EQ(failure(with("tools", {{{"name", "f"}, {"type", "web_search_20250305"}}})).second, "tools[0].type");
    EXPECT_EQ(failure(with("tools", {{{"name", "f"}, {"strict", true}}})).second, "tools[0].strict");
    EXPECT_EQ(failure(with("tools", {{{"name", "bad name"}}})).second, "tools[0].function.name");
    EXPECT_EQ(failure(with("thinking", {{"type", "enabled"}})).second, "thinking.budget_tokens");
    EXPECT_EQ(failure(with("thinking", true)).second, "thinking");
    for (const char * field : {"top_logprobs", "container", "mcp_servers", "seed", "n"}) {
        EXPECT_EQ(failure(with(field, 1)), std::make_pair(400, std::string(field))) << field;
    }
    EXPECT_EQ(failure(with("metadata", {{"user_id", "x"}})).first, 0); // ignored: it does not change the result
    EXPECT_EQ(failure(message("x", "system")).second, "messages[0].role");
    EXPECT_EQ(failure(message({{{"type", "image"}}})).second, "messages[0].content[0].type");
    EXPECT_EQ(failure(message({{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}}})).second, "messages[0].content[0].type");
    EXPECT_EQ(failure(message({{{"type", "tool_result"}}})).second, "messages[0].content[0].tool_use_id");
    EXPECT_EQ(failure(message({{{"type", "tool_result"}, {"tool_use_id", "a"}, {"is_error", 1}}})).second,
              "messages[0].content[0].is_error");
    EXPECT_EQ(failure(message({{{"type", "thinking"}, {"thinking", "t"}}})).second, "messages[0].content[0].type");
    EXPECT_EQ(failure(message({{{"type", "redacted_thinking"}, {"data", "t"}}}, "assistant")).second, "messages[0].content[0].type");
    EXPECT_EQ(failure(message({{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}, {"input", 3}}}, "assistant")).second,
              "messages[0].content[0].input");
    EXPECT_EQ(failure(message(3)).second, "messages[0].content");
    try {
        parse_anthropic_request("{\"max_tokens\": ", limits());
        FAIL();
    } catch (const api_error & e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(e.code(), "invalid_json");
    }
}

TEST(ServeAnthropic, ErrorShape) {
    const json e = anthropic_error_body(invalid_request("'x' is bad", "x"));
    EXPECT_EQ(e, json({{"type", "error"}, {"error", {{"type", "invalid_request_error"}, {"message", "'x' is bad"}}}}));
    const std::pair<int, const char *> types[] = {{401, "authentication_error"}, {403, "permission_error"}, {404, "not_found_error"},
                                                  {413, "invalid_request_error"}, {429, "rate_limit_error"}, {503, "overloaded_error"},
                                                  {500, "api_error"}};
    for (const auto & [status, type] : types) {
        EXPECT_EQ(anthropic_error_body(api_error(status, "t", "m"))["error"]["type"], type) << status;
    }
}

specdec::request_result result(specdec_stop_reason stop, const std::string & text) {
    specdec::request_result r;
    r.output.tokens = {10, 11, 12};
    r.output.text = text;
    r.output.stop = stop;
    return r;
}

response_info info() {
    response_info i;
    i.kind = endpoint::chat;
    i.id = "msg_7";
    i.model = "tiny";
    i.strategy = "mtp";
    return i;
}

TEST(ServeAnthropic, StopReasons) {
    const parsed_answer text{"abc", {}, {}};
    const parsed_answer call{"", {{"", "f", "{}"}}, {}};
    const auto stop = [](specdec_stop_reason why, const parsed_answer & a, const std::vector<std::string> & seqs, const std::string & pieces) {
        const specdec::request_result r = result(why, "abc");
        const anthropic_stop s = anthropic_stop_of({&r, 5}, a, seqs, pieces);
        return std::make_pair(s.reason, s.sequence);
    };
    EXPECT_EQ(stop(SPECDEC_STOP_EOG, text, {}, "abc"), std::make_pair(json("end_turn"), json()));
    EXPECT_EQ(stop(SPECDEC_STOP_EOG, call, {}, "abc"), std::make_pair(json("tool_use"), json()));
    EXPECT_EQ(stop(SPECDEC_STOP_BUDGET, text, {}, "abc"), std::make_pair(json("max_tokens"), json()));
    EXPECT_EQ(stop(SPECDEC_STOP_CONTEXT, text, {}, "abc"), std::make_pair(json("max_tokens"), json()));
    EXPECT_EQ(stop(SPECDEC_STOP_STRING, text, {"zz", "END", "EN"}, "abcEND"), std::make_pair(json("stop_sequence"), json("END")));
    // A stop string of the chat format's, not the client's: the turn ended.
    EXPECT_EQ(stop(SPECDEC_STOP_STRING, text, {"zz"}, "abc<|im_end|>"), std::make_pair(json("end_turn"), json()));
    EXPECT_EQ(stop(SPECDEC_STOP_CANCELLED, text, {}, "abc"), std::make_pair(json(), json()));
}

TEST(ServeAnthropic, MessageBody) {
    const specdec::request_result r = result(SPECDEC_STOP_EOG, "raw");
    const parsed_answer a{"hello", {{"", "get_weather", R"({"city":"Paris"})"}, {"toolu_x", "f", "not json"}}, "hmm"};
    const anthropic_stop stop{"tool_use", nullptr};
    const json m = anthropic_message_body(info(), {&r, 5}, a, stop);
    EXPECT_EQ(m["id"], "msg_7");
    EXPECT_EQ(m["type"], "message");
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_EQ(m["model"], "tiny");
    ASSERT_EQ(m["content"].size(), 4u);
    EXPECT_EQ(m["content"][0], json({{"type", "thinking"}, {"thinking", "hmm"}, {"signature", ""}}));
    EXPECT_EQ(m["content"][1], json({{"type", "text"}, {"text", "hello"}}));
    EXPECT_EQ(m["content"][2]["type"], "tool_use");
    EXPECT_EQ(m["content"][2]["id"].get<std::string>().rfind("toolu_", 0), 0u);
    EXPECT_EQ(m["content"][2]["id"].get<std::string>().size(), 30u);
    EXPECT_EQ(m["content"][2]["input"], json({{"city", "Paris"}}));
    EXPECT_EQ(m["content"][3]["id"], "toolu_x");
    EXPECT_EQ(m["content"][3]["input"], json::object());
    EXPECT_EQ(m["stop_reason"], "tool_use");
    EXPECT_TRUE(m["stop_sequence"].is_null());
    EXPECT_EQ(m["usage"], json({{"input_tokens", 5}, {"output_tokens", 3}}));
    EXPECT_EQ(m["specdec"]["tokens"], json({10, 11, 12}));
    EXPECT_EQ(m["specdec"]["strategy"], "mtp");
    EXPECT_EQ(anthropic_count_tokens_body(12), json({{"input_tokens", 12}}));
}

// The events of a stream as (name, data) pairs; each name equals its data's type.
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
            out.push_back(std::move(d));
        }
    }
    return out;
}

TEST(ServeAnthropic, StreamEvents) {
    const response_info i = info();
    anthropic_stream s;
    std::string sse = anthropic_stream_start(i, 5);
    sse += anthropic_stream_events(s, {"", {}, "thi"}, true);
    sse += anthropic_stream_events(s, {"", {}, "think"}, true);
    sse += anthropic_stream_events(s, {"Hi", {}, "think"}, true);
    sse += anthropic_stream_events(s, {"Hi", {{"", "f", ""}}, "think"}, true); // the name may not be whole yet
    sse += anthropic_stream_events(s, {"Hi", {{"", "f", "{\"a\":"}}, "think"}, true);
    sse += anthropic_stream_events(s, {"Hi", {{"", "f", "{\"a\":1}"}}, "think"}, false);
    const specdec::request_result r = result(SPECDEC_STOP_EOG, "raw");
    sse += anthropic_stream_end(s, i, {&r, 5}, {"tool_use", nullptr});
    const std::vector<json> e = events_of(sse);
    std::vector<std::string> types;
    for (const json & x : e) {
        types.push_back(x["type"]);
    }
    EXPECT_EQ(types, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta", "content_block_delta",
                                               "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
                                               "content_block_start", "content_block_delta", "content_block_delta",
                                               "content_block_stop", "message_delta", "message_stop"}));
    EXPECT_EQ(e[0]["message"]["content"], json::array());
    EXPECT_EQ(e[0]["message"]["usage"], json({{"input_tokens", 5}, {"output_tokens", 0}}));
    EXPECT_EQ(e[0]["message"]["id"], "msg_7");
    EXPECT_EQ(e[1], json({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}}));
    EXPECT_EQ(e[2]["delta"], json({{"type", "thinking_delta"}, {"thinking", "thi"}}));
    EXPECT_EQ(e[3]["delta"], json({{"type", "thinking_delta"}, {"thinking", "nk"}}));
    EXPECT_EQ(e[4]["index"], 0);
    EXPECT_EQ(e[5]["content_block"], json({{"type", "text"}, {"text", ""}}));
    EXPECT_EQ(e[5]["index"], 1);
    EXPECT_EQ(e[6]["delta"], json({{"type", "text_delta"}, {"text", "Hi"}}));
    EXPECT_EQ(e[8]["index"], 2);
    EXPECT_EQ(e[8]["content_block"]["type"], "tool_use");
    EXPECT_EQ(e[8]["content_block"]["name"], "f");
    EXPECT_EQ(e[8]["content_block"]["input"], json::object());
    EXPECT_EQ(e[8]["content_block"]["id"].get<std::string>().rfind("toolu_", 0), 0u);
    EXPECT_EQ(e[9]["delta"], json({{"type", "input_json_delta"}, {"partial_json", "{\"a\":"}}));
    EXPECT_EQ(e[10]["delta"], json({{"type", "input_json_delta"}, {"partial_json", "1}"}}));
    EXPECT_EQ(e[11]["index"], 2);
    EXPECT_EQ(e[12]["delta"], json({{"stop_reason", "tool_use"}, {"stop_sequence", nullptr}}));
    EXPECT_EQ(e[12]["usage"], json({{"output_tokens", 3}}));
    EXPECT_EQ(e[12]["specdec"]["tokens"], json({10, 11, 12}));
    EXPECT_EQ(anthropic_stream_events(s, {"Hi", {{"", "f", "{\"a\":1}"}}, "think"}, false), ""); // nothing new
}

} // namespace
} // namespace cli::serve
