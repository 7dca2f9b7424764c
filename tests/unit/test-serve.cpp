// `specdec serve` without a model or a socket: request parsing and
// validation (every bad field is a 4xx with OpenAI's error object), the
// response and SSE formatting, and the Prometheus text.
#include "serve-metrics.h"
#include "serve-openai.h"
#include "serve-responses.h"
#include "serve-scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace cli::serve {
namespace {

using nlohmann::json;

request_limits limits() {
    request_limits l;
    l.model_id = "tiny";
    l.n_ctx = 256;
    l.n_slots = 4;
    l.max_stop = 4;
    return l;
}

parsed_request completion(const std::string & body) {
    return parse_request(endpoint::completions, body, limits());
}

// The status and param of the api_error that parsing `body` throws (0 if none).
std::pair<int, std::string> failure(endpoint kind, const std::string & body) {
    try {
        parse_request(kind, body, limits());
    } catch (const api_error & e) {
        return {e.status(), e.param()};
    }
    return {0, ""};
}

struct api_failure {
    int         status = 0;
    std::string param;
    std::string code;
    std::string message;
};

api_failure failure_of(endpoint kind, const std::string & body, const request_limits & l = limits()) {
    try {
        parse_request(kind, body, l);
    } catch (const api_error & e) {
        return {e.status(), e.param(), e.code(), e.what()};
    }
    return {};
}

TEST(ServeParse, CompletionDefaultsAreOpenAIs) {
    const parsed_request r = completion(R"({"prompt": "abc"})");
    ASSERT_EQ(r.prompts.size(), 1u);
    EXPECT_EQ(r.prompts[0].text, "abc");
    EXPECT_EQ(r.n, 1u);
    EXPECT_FALSE(r.stream);
    EXPECT_EQ(r.max_tokens, -1);
    EXPECT_FLOAT_EQ(r.temperature, 1.0f);
    EXPECT_FLOAT_EQ(r.top_p, 1.0f);
    EXPECT_FALSE(r.seed.has_value());
    EXPECT_TRUE(r.stop.empty());
    const specdec::request_params p = to_engine_params(r, 256, 77, 3, SPECDEC_ACCEPT_EXACT);
    EXPECT_EQ(p.n_predict, 16); // OpenAI's completions default
    EXPECT_EQ(p.seed, 77u);
    EXPECT_EQ(p.n_draft, 3);
}

TEST(ServeParse, EveryFieldIsRead) {
    const parsed_request r = completion(R"({"prompt": ["abc"], "model": "tiny", "stream": true, "max_tokens": 9,
        "temperature": 0, "top_p": 0.5, "top_k": 40, "min_p": 0.1, "seed": 4294967295, "stop": ["x", "yz"],
        "unknown_field": {"ignored": true}, "n": 1})");
    ASSERT_EQ(r.prompts.size(), 1u);
    EXPECT_EQ(r.prompts[0].text, "abc");
    EXPECT_TRUE(r.stream);
    EXPECT_EQ(r.max_tokens, 9);
    EXPECT_FLOAT_EQ(r.temperature, 0.0f);
    EXPECT_FLOAT_EQ(r.top_p, 0.5f);
    EXPECT_EQ(r.top_k, 40);
    EXPECT_FLOAT_EQ(r.min_p, 0.1f);
    ASSERT_TRUE(r.seed.has_value());
    EXPECT_EQ(*r.seed, 4294967295u);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
    const specdec::request_params p = to_engine_params(r, 256, 1, 0, SPECDEC_ACCEPT_EXACT);
    EXPECT_EQ(p.n_predict, 9);
    EXPECT_EQ(p.seed, 4294967295u);
    EXPECT_EQ(completion(R"({"prompt": "a", "stop": "s", "seed": -1})").stop, std::vector<std::string>{"s"});
    // The accept mode: the request's, else the server's.
    EXPECT_EQ(p.accept, SPECDEC_ACCEPT_EXACT);
    EXPECT_EQ(to_engine_params(r, 256, 1, 0, SPECDEC_ACCEPT_REJECTION).accept, SPECDEC_ACCEPT_REJECTION);
    const parsed_request named = completion(R"({"prompt": "a", "speculative_accept": "exact", "temperature": 1})");
    EXPECT_EQ(to_engine_params(named, 256, 1, 0, SPECDEC_ACCEPT_REJECTION).accept, SPECDEC_ACCEPT_EXACT);
    EXPECT_EQ(accept_ran(to_engine_params(named, 256, 1, 3, SPECDEC_ACCEPT_REJECTION)), SPECDEC_ACCEPT_EXACT);
    const parsed_request rej = completion(R"({"prompt": "a", "speculative_accept": "rejection", "temperature": 1})");
    EXPECT_EQ(accept_ran(to_engine_params(rej, 256, 1, 3, SPECDEC_ACCEPT_EXACT)), SPECDEC_ACCEPT_REJECTION);
    EXPECT_EQ(accept_ran(to_engine_params(rej, 256, 1, 0, SPECDEC_ACCEPT_EXACT)), SPECDEC_ACCEPT_EXACT); // plain decoding verifies nothing
    const parsed_request greedy = completion(R"({"prompt": "a", "speculative_accept": "rejection", "temperature": 0})");
    EXPECT_EQ(accept_ran(to_engine_params(greedy, 256, 1, 3, SPECDEC_ACCEPT_EXACT)), SPECDEC_ACCEPT_EXACT); // greedy is exact in both
    EXPECT_FALSE(completion(R"({"prompt": "a", "seed": -1})").seed.has_value()); // llama-server's "random"
}

TEST(ServeParse, ChatMessages) {
    const parsed_request r = parse_request(endpoint::chat, R"({"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": null}]})", limits());
    ASSERT_EQ(r.messages.size(), 3u);
    EXPECT_EQ(r.messages[0].role, "system");
    EXPECT_EQ(r.messages[1].content, "a\nb");
    EXPECT_EQ(r.messages[1].content_parts, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(r.messages[0].content_parts.empty());
    EXPECT_EQ(r.messages[2].content, "");
    EXPECT_EQ(to_engine_params(r, 256, 0, 0, SPECDEC_ACCEPT_EXACT).n_predict, 256); // chat: until the context is full
    EXPECT_EQ(parse_request(endpoint::chat, R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 5})",
                            limits()).max_tokens, 5);
}

TEST(ServeParse, AConversationEndingWithTheAssistantContinuesIt) {
    const auto chat = [](const std::string & messages, const std::string & more = "") {
        return parse_request(endpoint::chat, R"({"messages": )" + messages + more + "}", limits());
    };
    const std::string prefill = R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])";
    const std::string turn = R"([{"role": "user", "content": "q"}])";
    const chat_options server;
    chat_options off;
    off.prefill_assistant = false;
    // The server's --prefill-assistant decides when the request does not.
    EXPECT_EQ(chat_options_for(chat(prefill), server).continue_final, continuation::automatic);
    EXPECT_FALSE(chat_options_for(chat(prefill), server).add_generation_prompt);
    EXPECT_EQ(chat_options_for(chat(prefill), off).continue_final, continuation::none);
    EXPECT_TRUE(chat_options_for(chat(prefill), off).add_generation_prompt);
    EXPECT_EQ(chat_options_for(chat(turn), server).continue_final, continuation::none);
    // The request's fields over it.
    EXPECT_EQ(chat_options_for(chat(prefill, R"(, "continue_final_message": false)"), server).continue_final, continuation::none);
    EXPECT_EQ(chat_options_for(chat(prefill, R"(, "continue_final_message": "content", "add_generation_prompt": false)"), off).continue_final,
              continuation::content);
    EXPECT_EQ(chat_options_for(chat(prefill, R"(, "continue_final_message": "reasoning_content", "add_generation_prompt": false)"), server)
                  .continue_final,
              continuation::reasoning);
    EXPECT_FALSE(chat_options_for(chat(turn, R"(, "add_generation_prompt": false)"), server).add_generation_prompt);
    // What cannot be continued, or asks for both.
    const auto refused = [&](const parsed_request & r, const chat_options & o) {
        try {
            chat_options_for(r, o);
        } catch (const api_error & e) {
            return e.param();
        }
        return std::string("(accepted)");
    };
    EXPECT_EQ(refused(chat(prefill, R"(, "continue_final_message": true)"), server), "add_generation_prompt");
    EXPECT_EQ(refused(chat(turn, R"(, "continue_final_message": true, "add_generation_prompt": false)"), server), "continue_final_message");
    EXPECT_EQ(refused(chat(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}])"),
                      server),
              "messages");
    EXPECT_EQ(refused(chat(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls":
        [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}])"), server),
              "messages");
    EXPECT_EQ(failure_of(endpoint::chat, R"({"messages": [{"role": "user", "content": "q"}], "continue_final_message": 1})").param,
              "continue_final_message");
    EXPECT_EQ(failure_of(endpoint::completions, R"({"prompt": "q", "add_generation_prompt": true})").param, "add_generation_prompt");
}

TEST(ServeParse, SeveralPromptsAndChoices) {
    const parsed_request texts = completion(R"({"prompt": ["ab", "c"], "n": 3})");
    ASSERT_EQ(texts.prompts.size(), 2u);
    EXPECT_EQ(texts.prompts[0].text, "ab");
    EXPECT_EQ(texts.prompts[1].text, "c");
    EXPECT_TRUE(texts.prompts[1].parts.empty());
    EXPECT_EQ(texts.n, 3u);
    const parsed_request tokens = completion(R"({"prompt": [[1, 2], [3, "x", 4]]})");
    ASSERT_EQ(tokens.prompts.size(), 2u);
    ASSERT_EQ(tokens.prompts[1].parts.size(), 3u);
    EXPECT_EQ(tokens.prompts[1].parts[0].token, 3);
    EXPECT_EQ(tokens.prompts[1].parts[1].text, "x");
    EXPECT_EQ(tokens.prompts[1].text, "x");
    const parsed_request mixed = completion(R"({"prompt": [12, "x", 34]})");
    ASSERT_EQ(mixed.prompts.size(), 1u) << "ids and text in one list: one prompt";
    EXPECT_EQ(mixed.prompts[0].parts.size(), 3u);
    request_limits few = limits();
    few.max_prompts = 2;
    EXPECT_THROW(parse_request(endpoint::completions, R"({"prompt": ["a", "b", "c"]})", few), api_error);
    EXPECT_EQ(parse_request(endpoint::chat, R"({"messages": [{"role": "user", "content": "a"}], "n": 4})", limits()).n, 4u);
}

// llama-server's prompt object: its prompt_string is the prompt (text, ids, or both, in a list of prompts too); multimodal data is refused.
TEST(ServeParse, PromptObjects) {
    const parsed_request one = completion(R"({"prompt": {"prompt_string": "ab", "multimodal_data": []}})");
    ASSERT_EQ(one.prompts.size(), 1u);
    EXPECT_EQ(one.prompts[0].text, "ab");
    EXPECT_TRUE(one.prompts[0].parts.empty());
    const parsed_request list = completion(R"({"prompt": [[1, 2], {"prompt_string": [3, "x"]}, {"prompt_string": ["y", "z"]}, "w"]})");
    ASSERT_EQ(list.prompts.size(), 4u);
    ASSERT_EQ(list.prompts[1].parts.size(), 2u);
    EXPECT_EQ(list.prompts[1].parts[0].token, 3);
    EXPECT_EQ(list.prompts[1].parts[1].text, "x");
    ASSERT_EQ(list.prompts[2].parts.size(), 2u) << "texts alone: their tokens joined, as llama-server's tokenize_mixed";
    EXPECT_EQ(list.prompts[2].text, "yz");
    EXPECT_EQ(list.prompts[3].text, "w");
    for (const char * prompt : {R"({"prompt_string": "a", "multimodal_data": ["iVBORw0KGgo="]})", R"({"text": "a"})",
                                       R"({"prompt_string": 5})", R"([1, {"prompt_string": "a"}])", R"({"prompt_string": []})"}) {
        const std::string body = std::string(R"({"prompt": )") + prompt + "}";
        EXPECT_EQ(failure(endpoint::completions, body), (std::pair<int, std::string>{400, "prompt"})) << body;
    }
    try {
        completion(R"({"prompt": [{"prompt_string": "a", "multimodal_data": "iVBORw0KGgo="}]})");
        ADD_FAILURE() << "multimodal data accepted";
    } catch (const api_error & e) {
        EXPECT_EQ(e.code(), "unsupported_parameter");
    }
}

TEST(ServeResponse, SeveralChoicesCountEachPromptOnce) {
    specdec::request_result a, b;
    a.output.tokens = {1, 2, 3};
    a.output.text = "abc";
    a.output.stop = SPECDEC_STOP_BUDGET;
    a.n_prompt_cached = 0;
    b.output.tokens = {4, 5};
    b.output.text = "de";
    b.output.stop = SPECDEC_STOP_EOG;
    b.n_prompt_cached = 7; // the prompt's cells copied from a's
    response_info info;
    info.id = "cmpl-1";
    info.model = "tiny";
    std::vector<response_info> infos = {info, info};
    infos[1].index = 1;
    const json j = response_body(infos, {{&a, 7}, {&b, 7}}, 2);
    ASSERT_EQ(j["choices"].size(), 2u);
    EXPECT_EQ(j["choices"][0]["index"], 0);
    EXPECT_EQ(j["choices"][1]["index"], 1);
    EXPECT_EQ(j["choices"][0]["text"], "abc");
    EXPECT_EQ(j["choices"][1]["text"], "de");
    EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
    EXPECT_EQ(j["usage"]["prompt_tokens"], 7) << "one prompt, n = 2";
    EXPECT_EQ(j["usage"]["completion_tokens"], 5);
    EXPECT_EQ(j["usage"]["total_tokens"], 12);
    EXPECT_EQ(j["specdec"].size(), 2u);
    EXPECT_EQ(usage_body({{&a, 7}, {&b, 4}}, 1)["prompt_tokens"], 11) << "two prompts, n = 1";
    EXPECT_EQ(chunk_body(infos[1], "x")["choices"][0]["index"], 1);
    EXPECT_EQ(final_chunk_body(infos[1], {&b, 7})["choices"][0]["index"], 1);
}

TEST(ServeParse, BadRequestsAre400WithTheField) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"({"prompt": "a")", ""},                              // malformed JSON
        {R"([1, 2])", ""},                                      // not an object
        {R"({})", "prompt"},                                    // missing
        {R"({"prompt": 5})", "prompt"},
        {R"({"prompt": []})", "prompt"},
        {R"({"prompt": ["a", 5.5]})", "prompt"},
        {R"({"prompt": ["a", ["b"]]})", "prompt"},               // a list of texts in a list of prompts
        {R"({"prompt": "a", "n": 0})", "n"},
        {R"({"prompt": "a", "n": 5})", "n"},                      // above the slots (4 here)
        {R"({"prompt": "a", "model": 3})", "model"},
        {R"({"prompt": "a", "stream": "yes"})", "stream"},
        {R"({"prompt": "a", "max_tokens": -1})", "max_tokens"},
        {R"({"prompt": "a", "max_tokens": 1.5})", "max_tokens"},
        {R"({"prompt": "a", "max_tokens": "9"})", "max_tokens"},
        {R"({"prompt": "a", "max_tokens": 100000000})", "max_tokens"},
        {R"({"prompt": "a", "temperature": -0.1})", "temperature"},
        {R"({"prompt": "a", "temperature": 2.5})", "temperature"},
        {R"({"prompt": "a", "temperature": "hot"})", "temperature"},
        {R"({"prompt": "a", "top_p": 0})", "top_p"},
        {R"({"prompt": "a", "top_p": 1.01})", "top_p"},
        {R"({"prompt": "a", "min_p": 1})", "min_p"},
        {R"({"prompt": "a", "top_k": -2})", "top_k"},
        {R"({"prompt": "a", "seed": 4294967296})", "seed"},
        {R"({"prompt": "a", "seed": -2})", "seed"},
        {R"({"prompt": "a", "stop": [""]})", "stop"},
        {R"({"prompt": "a", "stop": [1]})", "stop"},
        {R"({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]})", "stop"},
        {R"({"prompt": "a", "stop": {"x": 1}})", "stop"},
    };
    for (const auto & [body, param] : cases) {
        const auto [status, got] = failure(endpoint::completions, body);
        EXPECT_EQ(status, 400) << body;
        EXPECT_EQ(got, param) << body;
    }
    const std::vector<std::string> chat_cases = {
        R"({"messages": []})",
        R"({"messages": "hi"})",
        R"({"prompt": "a"})",
        R"({"messages": [{"content": "x"}]})",
        R"({"messages": [{"role": "robot", "content": "x"}]})",
        R"({"messages": [{"role": "user", "content": 3}]})",
        R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
        R"({"messages": [7]})",
    };
    for (const auto & body : chat_cases) {
        EXPECT_EQ(failure(endpoint::chat, body).first, 400) << body;
    }
}

// Issue 33: stop strings of 8-200 KB made the engine thread's per-token
// check cost #stops x output x length, for every request. Each string and
// their total are capped; the 400 names the limit.
TEST(ServeParse, StopStringsAreCappedInLength) {
    request_limits l = limits(); // 256 bytes each, 1024 in all
    l.max_stop = 16;
    const auto message_of = [&](const json & stop) {
        try {
            parse_request(endpoint::completions, json({{"prompt", "a"}, {"stop", stop}}).dump(), l);
        } catch (const api_error & e) {
            EXPECT_EQ(e.status(), 400);
            EXPECT_EQ(e.param(), "stop");
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(message_of(std::string(l.max_stop_bytes, 'x')), "");
    EXPECT_NE(message_of(std::string(l.max_stop_bytes + 1, 'x')).find("at most 256"), std::string::npos);
    EXPECT_NE(message_of(json::array({"a", std::string(300, 'y')})).find("at most 256"), std::string::npos);
    const std::string fifth(l.max_stop_total_bytes / 5, 'z'); // 204 bytes
    EXPECT_EQ(message_of(json::array({fifth, fifth, fifth, fifth, fifth})), "");
    EXPECT_NE(message_of(json::array({fifth, fifth, fifth, fifth, fifth + "12345"})).find("at most 1024"), std::string::npos);
}

// Issue 33: fields that change the result were accepted and ignored, so an
// evaluation harness or a JSON-mode client got wrong answers with no error.
// Each is a 400 naming it unless it asks for nothing; unknown fields stay ignored.
TEST(ServeParse, UnimplementedFieldsThatChangeTheResultAre400) {
    const std::vector<std::pair<std::string, std::string>> refused = {
        {R"("suffix": "}")", "suffix"},
        {R"("tool_choice": "required")", "tool_choice"},
        {R"("tool_choice": {"type": "function", "function": {"name": "f"}})", "tool_choice"},
        {R"("functions": [{"name": "f"}])", "functions"},
        {R"("function_call": {"name": "f"})", "function_call"},
        {R"("best_of": 2)", "best_of"},
        {R"("mirostat": 2)", "mirostat"},
        {R"("typical_p": 0.9)", "typical_p"},
        {R"("tfs_z": 0.5)", "tfs_z"},
        {R"("top_n_sigma": 1.5)", "top_n_sigma"},
        {R"("xtc_probability": 0.5)", "xtc_probability"},
        {R"("dry_multiplier": 0.8)", "dry_multiplier"},
        {R"("dynatemp_range": 0.5)", "dynatemp_range"},
    };
    for (const auto & [field, param] : refused) {
        for (const endpoint kind : {endpoint::completions, endpoint::chat}) {
            const std::string body = (kind == endpoint::chat ? R"({"messages": [{"role": "user", "content": "a"}], )"
                                                             : R"({"prompt": "a", )") + field + "}";
            EXPECT_EQ(failure(kind, body), (std::pair<int, std::string>{400, param})) << body;
        }
    }
    try {
        completion(R"({"prompt": "a", "suffix": "b"})");
        ADD_FAILURE() << "accepted";
    } catch (const api_error & e) {
        EXPECT_EQ(e.code(), "unsupported_parameter");
        EXPECT_NE(std::string(e.what()).find("'suffix'"), std::string::npos) << e.what();
    }
    // Their defaults (and null) ask for nothing; unknown fields are ignored.
    const std::vector<std::string> accepted = {
        R"("logprobs": false)", R"("logprobs": null)", R"("top_logprobs": 0)", R"("echo": false)", R"("suffix": "")",
        R"("logit_bias": {})", R"("response_format": {"type": "text"})", R"("tools": [])", R"("tool_choice": "none")",
        R"("tool_choice": "auto")", R"("presence_penalty": 0)", R"("frequency_penalty": 0.0)", R"("repeat_penalty": 1)",
        R"("best_of": 1)", R"("n": 1)", R"("user": "u")", R"("frobnicate": [1])", R"("mirostat": 0)", R"("typical_p": 1)",
        R"("tfs_z": 1.0)", R"("top_n_sigma": -1)", R"("xtc_probability": 0)", R"("dry_multiplier": 0)", R"("dynatemp_range": 0)",
    };
    for (const auto & field : accepted) {
        const std::string body = R"({"prompt": "a", )" + field + "}";
        EXPECT_EQ(failure(endpoint::completions, body).first, 0) << body;
    }
}

TEST(ServeParse, FunctionNamesUpTo128Characters) {
    const auto tools = [](size_t n) {
        return R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": ")" +
               std::string(n, 'f') + R"("}}]})";
    };
    EXPECT_EQ(failure(endpoint::chat, tools(128)).first, 0) << "as long as Anthropic's (MCP tools' names)";
    EXPECT_EQ(failure(endpoint::chat, tools(129)), (std::pair<int, std::string>{400, "tools[0].function.name"}));
    EXPECT_EQ(failure(endpoint::chat, tools(0)).first, 400);
}

TEST(ServeParse, AnyModelIsServedUnlessStrict) {
    EXPECT_EQ(failure(endpoint::completions, R"({"prompt": "a", "model": "gpt-4"})").first, 0) << "as llama-server: any name";
    request_limits strict = limits();
    strict.strict_model = true;
    const api_failure f = failure_of(endpoint::completions, R"({"prompt": "a", "model": "gpt-4"})", strict);
    EXPECT_EQ(f.status, 404);
    EXPECT_EQ(f.param, "model");
    EXPECT_EQ(f.code, "model_not_found");
    EXPECT_EQ(failure_of(endpoint::completions, R"({"prompt": "a", "model": ""})", strict).status, 0); // empty: the served one
    EXPECT_EQ(failure_of(endpoint::completions, R"({"prompt": "a", "model": "tiny"})", strict).status, 0);
}

TEST(ServeFormat, ErrorObjectHasOpenAIsFields) {
    const json j = error_body(invalid_request("bad", "top_p"));
    EXPECT_EQ(j["error"]["message"], "bad");
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["param"], "top_p");
    EXPECT_EQ(j["error"]["code"], "invalid_value");
    const json k = error_body(api_error(503, "unavailable_error", "busy"));
    EXPECT_TRUE(k["error"]["param"].is_null());
    EXPECT_TRUE(k["error"]["code"].is_null());
}

// Chat's tools, tool_choice and parallel_tool_calls, and messages that
// carry tool calls and their results; completions take none of them.
TEST(ServeParse, ToolsAndToolMessages) {
    const auto chat = [](const std::string & fields) {
        return parse_request(endpoint::chat, R"({"messages": [{"role": "user", "content": "a"}], )" + fields + "}", limits());
    };
    const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}, {"type": "function", "function": {"name": "add"}}])";
    parsed_request r = chat(tools);
    ASSERT_EQ(r.tools.functions.size(), 2u);
    EXPECT_EQ(r.tools.functions[0].name, "get_weather");
    EXPECT_EQ(r.tools.functions[0].description, "d");
    EXPECT_EQ(json::parse(r.tools.functions[0].parameters)["properties"]["city"]["type"], "string");
    EXPECT_EQ(r.tools.functions[1].parameters, "") << "no parameters";
    EXPECT_EQ(r.tools.choice, tool_choice::automatic);
    EXPECT_FALSE(r.tools.parallel.has_value());
    EXPECT_EQ(chat(tools + R"(, "tool_choice": "none")").tools.choice, tool_choice::none);
    EXPECT_EQ(chat(tools + R"(, "tool_choice": "required")").tools.choice, tool_choice::required);
    r = chat(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "add"}}, "parallel_tool_calls": false)");
    EXPECT_EQ(r.tools.choice, tool_choice::required);
    EXPECT_EQ(r.tools.forced, "add");
    EXPECT_EQ(r.tools.parallel, std::optional<bool>(false));
    EXPECT_TRUE(chat(tools + R"(, "tool_choice": "none", "response_format": {"type": "json_object"})").json_schema) << "not called: free to shape";

    r = parse_request(endpoint::chat, R"({"messages": [{"role": "user", "content": "a"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}},
                                                               {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": {"a": 2}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "add", "content": "3"}]})", limits());
    ASSERT_EQ(r.messages.size(), 3u);
    ASSERT_EQ(r.messages[1].tool_calls.size(), 2u);
    EXPECT_EQ(r.messages[1].content, "");
    EXPECT_EQ(r.messages[1].tool_calls[0].id, "call_1");
    EXPECT_EQ(r.messages[1].tool_calls[0].name, "add");
    EXPECT_EQ(r.messages[1].tool_calls[0].arguments, R"({"a": 1})");
    EXPECT_EQ(json::parse(r.messages[1].tool_calls[1].arguments), (json{{"a", 2}})) << "an object is taken as its JSON text";
    EXPECT_EQ(r.messages[2].tool_call_id, "call_1");
    EXPECT_EQ(r.messages[2].name, "add");

    const std::vector<std::pair<std::string, std::string>> refused = {
        {R"("tools": [{"type": "retrieval"}])", "tools[0].type"},
        {R"("tools": {"type": "function"})", "tools"},
        {R"("tools": [{"type": "function", "function": {"description": "x"}}])", "tools[0].function.name"},
        {R"("tools": [{"type": "function", "function": {"name": "two words"}}])", "tools[0].function.name"},
        {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}])", "tools[0].function.parameters"},
        {R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])",
         "tools[1].function.name"},
        {tools + R"(, "tool_choice": "maybe")", "tool_choice"},
        {tools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})", "tool_choice"},
        {tools + R"(, "tool_choice": 1)", "tool_choice"},
        {tools + R"(, "parallel_tool_calls": "yes")", "parallel_tool_calls"},
        {tools + R"(, "response_format": {"type": "json_object"})", "response_format"},
        {tools + R"(, "grammar": "root ::= \"a\"")", "grammar"},
    };
    for (const auto & [fields, param] : refused) {
        const std::string body = R"({"messages": [{"role": "user", "content": "a"}], )" + fields + "}";
        EXPECT_EQ(failure(endpoint::chat, body), (std::pair<int, std::string>{400, param})) << body;
    }
    EXPECT_EQ(failure(endpoint::chat, R"({"messages": [{"role": "user", "content": "a", "tool_calls": []}]})"),
              (std::pair<int, std::string>{400, "messages[0].tool_calls"}));
    EXPECT_EQ(failure(endpoint::chat, R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 1}}]}]})"),
              (std::pair<int, std::string>{400, "messages[0].tool_calls[0].function.arguments"}));
    EXPECT_EQ(failure(endpoint::completions, R"({"prompt": "a", )" + tools + "}"), (std::pair<int, std::string>{400, "tools"}));

    // The template's grammar reaches the engine: lazy with triggers, or with a prefix.
    parsed_request g = chat(tools);
    const std::string trigger = "<tool_call>";
    g.grammar = "root ::= \"x\"";
    g.grammar_triggers = {trigger.c_str()};
    specdec::request_params p = to_engine_params(g, 256, 1, 0, SPECDEC_ACCEPT_EXACT);
    ASSERT_EQ(p.n_grammar_triggers, 1u);
    EXPECT_STREQ(p.grammar_triggers[0], "<tool_call>");
    EXPECT_EQ(p.grammar_prefix, nullptr);
    g.grammar_triggers.clear();
    g.grammar_prefix = "[assistant] ";
    p = to_engine_params(g, 256, 1, 0, SPECDEC_ACCEPT_EXACT);
    EXPECT_EQ(p.n_grammar_triggers, 0u);
    EXPECT_STREQ(p.grammar_prefix, "[assistant] ");
}

// A response's identity, the rest of response_info at its defaults.
response_info info_of(endpoint kind, std::string id, int64_t created, std::string model, std::string strategy) {
    response_info info;
    info.kind = kind;
    info.id = std::move(id);
    info.created = created;
    info.model = std::move(model);
    info.strategy = std::move(strategy);
    return info;
}

specdec::request_result sample_result() {
    specdec::request_result r;
    r.id = 3;
    r.seq_id = 0;
    r.n_prompt_cached = 2;
    r.output.tokens = {10, 11, 12, 13};
    r.output.text = "wxyz";
    r.output.stop = SPECDEC_STOP_BUDGET;
    r.output.stats.n_generated = 4;
    r.output.stats.n_steps = 2;
    r.output.stats.n_drafted = 4;
    r.output.stats.n_accepted = 3;
    r.output.stats.n_proposed_at[0] = 2;
    r.output.stats.n_proposed_at[1] = 2;
    r.output.stats.n_accepted_at[0] = 2;
    r.output.stats.n_accepted_at[1] = 1;
    r.output.stats.n_reached_at[0] = 2;
    r.output.stats.n_reached_at[1] = 2;
    r.times = {1500, 4000};
    return r;
}

TEST(ServeFormat, CompletionResponse) {
    const specdec::request_result r = sample_result();
    const response_info info = info_of(endpoint::completions, "cmpl-1", 1700000000, "tiny", "mtp");
    const json j = response_body(info, {&r, 5});
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["id"], "cmpl-1");
    EXPECT_EQ(j["model"], "tiny");
    EXPECT_EQ(j["choices"][0]["text"], "wxyz");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"], (json{{"prompt_tokens", 5},
                                {"completion_tokens", 4},
                                {"total_tokens", 9},
                                {"prompt_tokens_details", {{"cached_tokens", 2}}}}));
    const json & s = j["specdec"];
    EXPECT_EQ(s["strategy"], "mtp");
    EXPECT_EQ(s["accept"], "exact");
    EXPECT_EQ(s["tokens"], (json{10, 11, 12, 13}));
    EXPECT_EQ(s["drafted"], 4);
    EXPECT_EQ(s["accepted"], 3);
    EXPECT_EQ(s["steps"], 2);
    EXPECT_EQ(s["acceptance_by_position"], (json{1.0, 0.5}));
    EXPECT_EQ(s["drafts_by_position"], (json{2, 2}));
    EXPECT_DOUBLE_EQ(s["time_to_first_token_ms"].get<double>(), 1.5);
}

TEST(ServeFormat, ChatResponseAndChunks) {
    specdec::request_result r = sample_result();
    r.output.stop = SPECDEC_STOP_STRING;
    const response_info info = info_of(endpoint::chat, "chatcmpl-2", 1, "tiny", "none");
    const json j = response_body(info, {&r, 2});
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "wxyz"}}));
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");

    EXPECT_EQ(j["system_fingerprint"].get<std::string>().rfind('b', 0), 0u) << "llama-server's b<build>-<commit> form";
    // The stream opens with the role alone (content null), as llama-server
    // and OpenAI send it; content chunks carry no role.
    const json first = role_chunk_body(info);
    EXPECT_EQ(first["object"], "chat.completion.chunk");
    EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", nullptr}}));
    EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
    EXPECT_EQ(first["system_fingerprint"], j["system_fingerprint"]);
    EXPECT_EQ(chunk_body(info, "wx")["choices"][0]["delta"], (json{{"content", "wx"}}));
    const json last = final_chunk_body(info, {&r, 2});
    EXPECT_EQ(last["choices"][0]["delta"], json::object());
    EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
    EXPECT_FALSE(last.contains("usage")) << "usage comes only with stream_options.include_usage";
    EXPECT_EQ(last["specdec"]["accepted"], 3);

    // stream_options.include_usage, as OpenAI: every chunk has "usage": null,
    // then one more chunk with no choices carries it.
    response_info with_usage = info;
    with_usage.include_usage = true;
    EXPECT_TRUE(role_chunk_body(with_usage)["usage"].is_null());
    EXPECT_TRUE(chunk_body(with_usage, "yz")["usage"].is_null());
    EXPECT_TRUE(final_chunk_body(with_usage, {&r, 2})["usage"].is_null());
    const json usage = usage_chunk_body(with_usage, {{&r, 2}}, 1);
    EXPECT_EQ(usage["choices"], json::array());
    EXPECT_EQ(usage["usage"]["total_tokens"], 6);
    EXPECT_EQ(usage["object"], "chat.completion.chunk");
}

// An answer with tools: the message carries its calls (content null when
// it only calls), finish_reason "tool_calls" when it ended by itself; a
// stream sends each call's header once its name is whole, then fragments
// of its arguments, which add up to the whole answer's.
TEST(ServeFormat, ToolCalls) {
    specdec::request_result r = sample_result();
    r.output.stop = SPECDEC_STOP_EOG;
    response_info info = info_of(endpoint::chat, "chatcmpl-3", 1, "tiny", "none");
    parsed_answer called{"", {{"call_a", "add", R"({"a": 1})"}}, ""};
    info.answer = &called;
    json m = response_body(info, {&r, 2})["choices"][0];
    EXPECT_TRUE(m["message"]["content"].is_null());
    EXPECT_EQ(m["message"]["tool_calls"],
              (json::array({{{"id", "call_a"}, {"type", "function"}, {"function", {{"name", "add"}, {"arguments", R"({"a": 1})"}}}}})));
    EXPECT_EQ(m["finish_reason"], "tool_calls");
    EXPECT_EQ(final_chunk_body(info, {&r, 2})["choices"][0]["finish_reason"], "tool_calls");
    r.output.stop = SPECDEC_STOP_BUDGET;
    EXPECT_EQ(response_body(info, {&r, 2})["choices"][0]["finish_reason"], "length") << "cut short";
    parsed_answer said{"hello", {}, ""};
    info.answer = &said;
    r.output.stop = SPECDEC_STOP_EOG;
    m = response_body(info, {&r, 2})["choices"][0];
    EXPECT_EQ(m["message"], (json{{"role", "assistant"}, {"content", "hello"}}));
    EXPECT_EQ(m["finish_reason"], "stop");

    const std::string id = new_tool_call_id();
    EXPECT_EQ(id.size(), 29u);
    EXPECT_EQ(id.substr(0, 5), "call_");
    EXPECT_TRUE(std::all_of(id.begin() + 5, id.end(), [](unsigned char c) { return std::isalnum(c) != 0; })) << id;
    parsed_answer unnamed{"", {{"", "f", "{}"}, {"kept", "g", "{}"}}, ""};
    name_tool_calls(unnamed);
    EXPECT_EQ(unnamed.tool_calls[0].id.size(), 29u);
    EXPECT_EQ(unnamed.tool_calls[1].id, "kept");

    // The answer as a stream reads it, piece by piece; the last read is whole.
    const std::vector<std::pair<parsed_answer, bool>> reads = {
        {{"Let", {}, ""}, true},
        {{"Let me", {{"", "get", ""}}, ""}, true},                         // the name may still grow
        {{"Let me", {{"", "get_weather", R"({"ci)"}}, ""}, true},          // its arguments began: the name is whole
        {{"Let me", {{"", "get_weather", R"({"city": "P"})"}}, ""}, true},
        {{"Let me", {{"", "get_weather", R"({"city": "P"})"}, {"", "add", ""}}, ""}, true},
        {{"Let me", {{"", "get_weather", R"({"city": "P"})"}, {"", "add", "{}"}}, ""}, false},
    };
    answer_stream st;
    std::vector<json> deltas;
    for (const auto & [a, partial] : reads) {
        deltas.push_back(answer_delta(st, a, partial));
    }
    EXPECT_EQ(deltas[0], (json{{"content", "Let"}}));
    EXPECT_EQ(deltas[1], (json{{"content", " me"}}));
    ASSERT_TRUE(deltas[2].contains("tool_calls"));
    const json & head = deltas[2]["tool_calls"][0];
    EXPECT_EQ(head["index"], 0);
    EXPECT_EQ(head["type"], "function");
    EXPECT_EQ(head["function"], (json{{"name", "get_weather"}, {"arguments", R"({"ci)"}}));
    EXPECT_EQ(head["id"].get<std::string>().size(), 29u);
    EXPECT_EQ(deltas[3], (json{{"tool_calls", json::array({{{"index", 0}, {"function", {{"arguments", R"(ty": "P"})"}}}}})}}));
    EXPECT_EQ(deltas[4], json::object()) << "the second name may still grow";
    const json & second = deltas[5]["tool_calls"][0];
    EXPECT_EQ(second["index"], 1);
    EXPECT_EQ(second["function"], (json{{"name", "add"}, {"arguments", "{}"}}));
    // As a client adds them up.
    std::string content;
    std::vector<json> calls;
    for (const json & d : deltas) {
        content += d.value("content", "");
        for (const json & c : d.value("tool_calls", json::array())) {
            const size_t i = c["index"];
            if (i == calls.size()) {
                calls.push_back({{"id", c["id"]}, {"name", c["function"]["name"]}, {"arguments", ""}});
            }
            calls[i]["arguments"] = calls[i]["arguments"].get<std::string>() + c["function"].value("arguments", "");
        }
    }
    EXPECT_EQ(content, "Let me");
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0]["arguments"], R"({"city": "P"})");
    EXPECT_EQ(calls[1]["name"], "add");
    EXPECT_EQ(st.calls.size(), 2u);

    const json first = delta_chunk_body(info, deltas[0]);
    EXPECT_EQ(first["choices"][0]["delta"], (json{{"content", "Let"}}));
    EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
    EXPECT_EQ(delta_chunk_body(info, deltas[3])["choices"][0]["delta"], deltas[3]);
}

// logprobs / top_logprobs: completions take the legacy `logprobs: N` (0..5),
// chat `logprobs: true` with `top_logprobs` (0..20); stream_options needs a stream.
TEST(ServeParse, LogprobsAndStreamOptions) {
    EXPECT_EQ(completion(R"({"prompt": "a"})").n_top_logprobs, -1);
    EXPECT_EQ(completion(R"({"prompt": "a", "logprobs": 0})").n_top_logprobs, 0);
    EXPECT_EQ(completion(R"({"prompt": "a", "logprobs": 5})").n_top_logprobs, 5);
    EXPECT_EQ(failure(endpoint::completions, R"({"prompt": "a", "logprobs": 6})"), (std::pair<int, std::string>{400, "logprobs"}));
    EXPECT_EQ(failure(endpoint::completions, R"({"prompt": "a", "logprobs": true})"), (std::pair<int, std::string>{400, "logprobs"}));
    EXPECT_EQ(failure(endpoint::completions, R"({"prompt": "a", "top_logprobs": 2})"), (std::pair<int, std::string>{400, "top_logprobs"}));
    const std::string chat = R"({"messages": [{"role": "user", "content": "a"}], )";
    const auto chat_top = [&](const std::string & fields) { return parse_request(endpoint::chat, chat + fields + "}", limits()).n_top_logprobs; };
    EXPECT_EQ(chat_top(R"("logprobs": false)"), -1);
    EXPECT_EQ(chat_top(R"("logprobs": true)"), 0);
    EXPECT_EQ(chat_top(R"("logprobs": true, "top_logprobs": 20)"), 20);
    EXPECT_EQ(failure(endpoint::chat, chat + R"("logprobs": true, "top_logprobs": 21})"), (std::pair<int, std::string>{400, "top_logprobs"}));
    EXPECT_EQ(failure(endpoint::chat, chat + R"("top_logprobs": 2})"), (std::pair<int, std::string>{400, "top_logprobs"}));
    EXPECT_EQ(failure(endpoint::chat, chat + R"("logprobs": 3})"), (std::pair<int, std::string>{400, "logprobs"}));
    EXPECT_EQ(to_engine_params(completion(R"({"prompt": "a", "logprobs": 3})"), 256, 1, 0, SPECDEC_ACCEPT_EXACT).n_top_logprobs, 3);

    // echo: completions only; with logprobs it also scores the prompt, answered whole.
    const parsed_request e = completion(R"({"prompt": "a", "echo": true, "logprobs": 1, "max_tokens": 0})");
    EXPECT_TRUE(e.echo);
    EXPECT_TRUE(to_engine_params(e, 256, 1, 0, SPECDEC_ACCEPT_EXACT).prompt_logprobs);
    EXPECT_EQ(to_engine_params(e, 256, 1, 0, SPECDEC_ACCEPT_EXACT).n_predict, 0);
    EXPECT_FALSE(to_engine_params(completion(R"({"prompt": "a", "echo": true})"), 256, 1, 0, SPECDEC_ACCEPT_EXACT).prompt_logprobs);
    EXPECT_EQ(failure(endpoint::chat, chat + R"("echo": true})"), (std::pair<int, std::string>{400, "echo"}));
    EXPECT_EQ(failure(endpoint::completions, R"({"prompt": "a", "echo": true, "logprobs": 1, "stream": true})"),
              (std::pair<int, std::string>{400, "echo"}));

    EXPECT_TRUE(completion(R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": true}})").include_usage);
    EXPECT_FALSE(completion(R"({"prompt": "a", "stream": true, "stream_options": {}})").include_usage);
    EXPECT_EQ(failure(endpoint::completions, R"({"prompt": "a", "stream_options": {"include_usage": true}})"),
              (std::pair<int, std::string>{400, "stream_options"}));
    EXPECT_EQ(failure(endpoint::completions, R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": 1}})"),
              (std::pair<int, std::string>{400, "stream_options.include_usage"}));
}

// llama-server's logit_bias forms: [token or text, bias] pairs, text keys,
// false for -infinity; texts become their tokens in the request's order;
// ignore_eos puts -infinity on each end-of-generation token.
TEST(ServeParse, LlamaServerLogitBias) {
    parsed_request r = completion(R"({"prompt": "a", "logit_bias": [[5, 1.5], [" ab", false], [2, -100]], "ignore_eos": true})");
    ASSERT_EQ(r.logit_bias.size(), 2u);
    ASSERT_EQ(r.logit_bias_text.size(), 1u);
    EXPECT_EQ(r.logit_bias_text[0].text, " ab");
    EXPECT_EQ(r.logit_bias_text[0].bias, -INFINITY);
    const auto tokens = [](const std::string & t) {
        EXPECT_EQ(t, " ab");
        return std::vector<llama_token>{7, 8};
    };
    resolve_logit_bias(r, tokens, {0, 3});
    EXPECT_TRUE(r.logit_bias_text.empty());
    const std::vector<std::pair<llama_token, float>> want = {{5, 1.5f}, {7, -INFINITY}, {8, -INFINITY}, {2, -100.0f}, {0, -INFINITY}, {3, -INFINITY}};
    ASSERT_EQ(r.logit_bias.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(r.logit_bias[i].token, want[i].first) << i;
        EXPECT_EQ(r.logit_bias[i].bias, want[i].second) << i;
    }
    // An object's keys: token ids where strtol reads them whole, else texts.
    parsed_request o = completion(R"({"prompt": "a", "logit_bias": {"12": false, " x": 3, "4y": -1}})");
    ASSERT_EQ(o.logit_bias.size(), 1u);
    EXPECT_EQ(o.logit_bias[0].token, 12);
    EXPECT_EQ(o.logit_bias[0].bias, -INFINITY);
    ASSERT_EQ(o.logit_bias_text.size(), 2u);
    resolve_logit_bias(o, [](const std::string & t) { return std::vector<llama_token>(t.size(), 1); }, {9});
    EXPECT_EQ(o.logit_bias.size(), 5u) << "no ignore_eos: the end-of-generation tokens keep their logits";
}

// Logit biases, penalties, grammars and JSON schemas reach the engine's parameters.
TEST(ServeParse, LogitShapingAndStructuredOutput) {
    const parsed_request r = completion(
        R"({"prompt": "a", "logit_bias": {"42": -100, "7": 2.5}, "presence_penalty": 0.5, "frequency_penalty": -1, "repeat_penalty": 1.1, "repeat_last_n": 32})");
    ASSERT_EQ(r.logit_bias.size(), 2u);
    const specdec::request_params p = to_engine_params(r, 256, 1, 0, SPECDEC_ACCEPT_EXACT);
    ASSERT_EQ(p.n_logit_bias, 2u);
    EXPECT_EQ(p.logit_bias[0].token, 42);
    EXPECT_EQ(p.logit_bias[0].bias, -100.0f);
    EXPECT_EQ(p.logit_bias[1].token, 7);
    EXPECT_EQ(p.presence_penalty, 0.5f);
    EXPECT_EQ(p.frequency_penalty, -1.0f);
    EXPECT_FLOAT_EQ(p.repeat_penalty, 1.1f);
    EXPECT_EQ(p.repeat_last_n, 32);
    EXPECT_EQ(p.grammar, nullptr);
    for (const auto & [field, param] : std::vector<std::pair<std::string, std::string>>{
             {R"("logit_bias": {"1": true})", "logit_bias"},
             {R"("logit_bias": {"1": 101})", "logit_bias"},
             {R"("logit_bias": {"-1": 1})", "logit_bias"},
             {R"("logit_bias": {"": 1})", "logit_bias"},
             {R"("logit_bias": [1])", "logit_bias"},
             {R"("logit_bias": [[1, 2, 3]])", "logit_bias"},
             {R"("logit_bias": [[1.5, 2]])", "logit_bias"},
             {R"("logit_bias": [[1, "x"]])", "logit_bias"},
             {R"("logit_bias": [[99999999999, 1]])", "logit_bias"},
             {R"("logit_bias": "x")", "logit_bias"},
             {R"("presence_penalty": 2.5)", "presence_penalty"},
             {R"("repeat_penalty": 0)", "repeat_penalty"},
             {R"("grammar": 5)", "grammar"},
             {R"("response_format": {"type": "yaml"})", "response_format"},
             {R"("response_format": {"type": "json_schema"})", "response_format"},
             {R"("grammar": "root ::= [a]", "response_format": {"type": "json_object"})", "grammar"},
         }) {
        const std::string body = R"({"prompt": "a", )" + field + "}";
        EXPECT_EQ(failure(endpoint::completions, body), (std::pair<int, std::string>{400, param})) << body;
    }
    const parsed_request g = completion(R"({"prompt": "a", "grammar": "root ::= [a-c]+"})");
    EXPECT_STREQ(to_engine_params(g, 256, 1, 0, SPECDEC_ACCEPT_EXACT).grammar, "root ::= [a-c]+");
    EXPECT_FALSE(g.json_schema.has_value());
    EXPECT_EQ(completion(R"({"prompt": "a", "response_format": {"type": "json_object"}})").json_schema, R"({"type": "object"})");
    EXPECT_FALSE(completion(R"({"prompt": "a", "response_format": {"type": "text"}})").json_schema.has_value());
    EXPECT_EQ(json::parse(*completion(R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}}})").json_schema),
              (json{{"type", "integer"}}));
    EXPECT_EQ(completion(R"({"prompt": "a", "json_schema": {}})").json_schema, R"({"type": "object"})");
    // A schema's properties keep the order they were sent in, which the
    // grammar writes them in (a sorted body would put "age" first); tools'
    // parameters too.
    const std::string ordered = R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}})";
    EXPECT_EQ(completion(R"({"prompt": "a", "json_schema": )" + ordered + "}").json_schema, ordered);
    EXPECT_EQ(completion(R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": )" +
                         ordered + "}}}").json_schema,
              ordered);
    const parsed_request t = parse_request(endpoint::chat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function",
        "function": {"name": "f", "parameters": )" + ordered + "}}]}", limits());
    ASSERT_EQ(t.tools.functions.size(), 1u);
    EXPECT_EQ(t.tools.functions[0].parameters, ordered);
}

// Both shapes of `logprobs`, from the engine's numbers.
TEST(ServeFormat, Logprobs) {
    specdec::request_result r = sample_result(); // tokens 10..13, text "wxyz"
    r.output.logprobs = {-0.5f, -1.0f, -0.25f, -2.0f};
    for (llama_token t = 10; t < 14; ++t) {
        r.output.top_logprobs.push_back({t, -0.1f});
        r.output.top_logprobs.push_back({static_cast<llama_token>(t + 10), -3.0f});
    }
    response_info info = info_of(endpoint::chat, "chatcmpl-3", 1, "tiny", "mtp");
    info.n_top_logprobs = 2;
    info.piece = [](llama_token t) { return std::string(1, static_cast<char>('a' + t % 26)); };
    const json chat = response_body(info, {&r, 5})["choices"][0]["logprobs"];
    ASSERT_EQ(chat["content"].size(), 4u);
    EXPECT_EQ(chat["content"][1], (json{{"token", "l"}, {"logprob", -1.0},  {"bytes", {108}},
                                        {"top_logprobs", {{{"token", "l"}, {"logprob", -0.1f}, {"bytes", {108}}},
                                                          {{"token", "v"}, {"logprob", -3.0}, {"bytes", {118}}}}}}));
    info.kind = endpoint::completions;
    const json legacy = response_body(info, {&r, 5})["choices"][0]["logprobs"];
    EXPECT_EQ(legacy["tokens"], (json{"k", "l", "m", "n"}));
    EXPECT_EQ(legacy["token_logprobs"], (json{-0.5, -1.0, -0.25, -2.0}));
    EXPECT_EQ(legacy["top_logprobs"][3], (json{{"n", -0.1f}, {"x", -3.0}}));
    EXPECT_EQ(legacy["text_offset"], (json{0, 1, 2, 3}));
    // A stream's chunks count offsets on from the text before them.
    size_t offset = 7;
    specdec::sequence_result part;
    part.tokens = {12};
    part.logprobs = {-0.25f};
    part.top_logprobs = {{12, -0.1f}, {22, -3.0f}};
    EXPECT_EQ(logprobs_body(info, token_logprobs::of(part), offset)["text_offset"], (json{7}));
    EXPECT_EQ(offset, 8u);
    info.n_top_logprobs = -1;
    EXPECT_TRUE(response_body(info, {&r, 5})["choices"][0]["logprobs"].is_null());
}

TEST(ServeFormat, FinishReasons) {
    EXPECT_STREQ(finish_reason(SPECDEC_STOP_EOG), "stop");
    EXPECT_STREQ(finish_reason(SPECDEC_STOP_STRING), "stop");
    EXPECT_STREQ(finish_reason(SPECDEC_STOP_BUDGET), "length");
    EXPECT_STREQ(finish_reason(SPECDEC_STOP_CONTEXT), "length");
    EXPECT_EQ(finish_reason(SPECDEC_STOP_CANCELLED), nullptr);
    EXPECT_EQ(finish_reason(SPECDEC_STOP_ERROR), nullptr);
}

TEST(ServeFormat, ServerSentEvents) {
    const response_info info = info_of(endpoint::completions, "cmpl-9", 1, "tiny", "none");
    const std::string ev = sse_event(chunk_body(info, "a\nb", false));
    EXPECT_EQ(ev.rfind("data: {", 0), 0u);
    EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
    EXPECT_EQ(ev.find('\n'), ev.size() - 2); // one line: a newline in the text is escaped
    EXPECT_EQ(json::parse(ev.substr(6))["choices"][0]["text"], "a\nb");
    EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
    // Bytes that are not UTF-8 (a budget inside a character) are replaced, not thrown.
    EXPECT_NO_THROW(sse_event(chunk_body(info, "\xE2\x82", false)));
}

// The value of the series named exactly `series` in Prometheus text.
double series_value(const std::string & text, const std::string & series) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(series + " ", 0) == 0) {
            return std::stod(line.substr(series.size() + 1));
        }
    }
    ADD_FAILURE() << series << " not found in:\n" << text;
    return -1;
}

TEST(ServeMetrics, CountersUseLlamaServerNames) {
    metrics m;
    const std::string empty = m.render();
    EXPECT_EQ(series_value(empty, "llamacpp:spec_decode_num_draft_tokens_total"), 0);
    EXPECT_EQ(empty.find("accepted_tokens_per_pos_total{"), std::string::npos); // no positions yet, as upstream

    request_metrics r;
    r.n_prompt = 5;
    r.stop = SPECDEC_STOP_BUDGET;
    r.stats = sample_result().output.stats;
    r.ttft_s = 0.003;
    r.itl_s = 0.0007;
    r.prompt_s = 0.5;
    r.predicted_s = 1.5;
    r.n_predicted = 4;
    m.add_generated(4);
    m.add_step(2);
    m.add_step(1);
    m.add_finished(r);
    r.n_prompt_cached = 3; // reused, not processed
    r.stop = SPECDEC_STOP_CANCELLED;
    r.ttft_s = -1;
    r.itl_s = -1;
    m.add_finished(r);
    m.set_load(2, 1, 5);
    m.add_rejected();
    const std::string t = m.render();
    EXPECT_EQ(series_value(t, "llamacpp:prompt_tokens_total"), 7);
    EXPECT_EQ(series_value(t, "llamacpp:prompt_tokens_cached_total"), 3);
    EXPECT_DOUBLE_EQ(series_value(t, "llamacpp:prompt_seconds_total"), 1.0);
    EXPECT_DOUBLE_EQ(series_value(t, "llamacpp:tokens_predicted_seconds_total"), 3.0);
    EXPECT_EQ(series_value(t, "llamacpp:n_decode_total"), 2);
    EXPECT_DOUBLE_EQ(series_value(t, "llamacpp:n_busy_slots_per_decode"), 1.5);
    EXPECT_EQ(series_value(t, "llamacpp:n_tokens_max"), 9);
    EXPECT_DOUBLE_EQ(series_value(t, "llamacpp:prompt_tokens_seconds"), 7.0); // 7 processed in 1 s
    EXPECT_DOUBLE_EQ(series_value(t, "llamacpp:predicted_tokens_seconds"), 2.0); // 3 after the first, twice, in 3 s
    EXPECT_EQ(series_value(t, "llamacpp:tokens_predicted_total"), 4);
    EXPECT_EQ(series_value(t, "llamacpp:spec_decode_num_draft_tokens_total"), 8);
    EXPECT_EQ(series_value(t, "llamacpp:spec_decode_num_accepted_tokens_total"), 6);
    EXPECT_EQ(series_value(t, "llamacpp:spec_decode_num_drafts_total"), 4);
    EXPECT_EQ(series_value(t, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}"), 4);
    EXPECT_EQ(series_value(t, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"}"), 2);
    EXPECT_EQ(t.find("position=\"2\""), std::string::npos);
    EXPECT_EQ(series_value(t, "specdec:spec_decode_num_drafts_per_pos_total{position=\"1\"}"), 4);
    EXPECT_EQ(series_value(t, "llamacpp:requests_processing"), 2);
    EXPECT_EQ(series_value(t, "llamacpp:requests_deferred"), 1);
    EXPECT_EQ(series_value(t, "specdec:requests_paused"), 5);
    EXPECT_EQ(series_value(t, "specdec:requests_finished_total{reason=\"length\"}"), 1);
    EXPECT_EQ(series_value(t, "specdec:requests_finished_total{reason=\"cancelled\"}"), 1);
    EXPECT_EQ(series_value(t, "specdec:requests_rejected_total"), 1);
    EXPECT_NE(t.find("# TYPE llamacpp:spec_decode_num_drafts_total counter\n"), std::string::npos);
    EXPECT_NE(t.find("# TYPE llamacpp:requests_processing gauge\n"), std::string::npos);
    // Histograms: cumulative buckets, +Inf equals the count.
    EXPECT_EQ(series_value(t, "specdec:time_to_first_token_seconds_bucket{le=\"0.001\"}"), 0);
    EXPECT_EQ(series_value(t, "specdec:time_to_first_token_seconds_bucket{le=\"0.005\"}"), 1);
    EXPECT_EQ(series_value(t, "specdec:time_to_first_token_seconds_bucket{le=\"+Inf\"}"), 1);
    EXPECT_EQ(series_value(t, "specdec:time_to_first_token_seconds_count"), 1);
    EXPECT_DOUBLE_EQ(series_value(t, "specdec:time_to_first_token_seconds_sum"), 0.003);
    EXPECT_EQ(series_value(t, "specdec:inter_token_latency_seconds_bucket{le=\"0.001\"}"), 1);
}

TEST(ServeMetrics, EveryLineIsCommentOrSample) {
    metrics m;
    std::istringstream in(m.render());
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
            continue;
        }
        const size_t space = line.rfind(' ');
        ASSERT_NE(space, std::string::npos) << line;
        EXPECT_NO_THROW(std::stod(line.substr(space + 1))) << line;
    }
}

// Issue 43: a value nested 100,000 deep (200 KB) crashed the server through
// recursive printing and conversion. Every body is refused while it is
// parsed once it nests deeper than max_json_depth, in every field the
// parser reads (listed from serve-openai.cpp's own source, so a new field
// cannot escape this test) and in the nested places that hold values.
std::string nested(size_t depth, bool objects) {
    std::string s;
    s.reserve(depth * 6);
    for (size_t i = 0; i < depth; ++i) {
        s += objects ? "{\"a\":" : "[";
    }
    s += "1";
    for (size_t i = 0; i < depth; ++i) {
        s += objects ? '}' : ']';
    }
    return s;
}

// Every top-level field parse_request reads, as its source names them.
std::set<std::string> fields_read_by_the_parser() {
    std::ifstream in(SPECDEC_SERVE_OPENAI_SOURCE);
    std::stringstream text;
    text << in.rdbuf();
    const std::string src = text.str();
    const std::regex read(R"re((?:\bj|\bbody)\.(?:find|contains)\("([a-z_]+)"\)|(?:integer_in|number_in)\((?:j|body), "([a-z_]+)"|\n    \{"([a-z_]+)", ")re");
    std::set<std::string> out;
    for (auto it = std::sregex_iterator(src.begin(), src.end(), read); it != std::sregex_iterator(); ++it) {
        for (size_t g = 1; g <= 3; ++g) {
            if ((*it)[g].matched) {
                out.insert((*it)[g].str());
            }
        }
    }
    return out;
}

TEST(ServeBounds, EveryFieldNestedDeepIsA400NamingIt) {
    const std::set<std::string> read = fields_read_by_the_parser();
    ASSERT_GE(read.size(), 30u) << "the source's field reads were not found: " << SPECDEC_SERVE_OPENAI_SOURCE;
    for (const bool objects : {false, true}) {
        const std::string deep = nested(100000, objects);
        for (const std::string & field : read) {
            for (const endpoint kind : {endpoint::completions, endpoint::chat}) {
                const std::string base = kind == endpoint::chat ? R"({"messages": [{"role": "user", "content": "a"}], )"
                                                                : R"({"prompt": "a", )";
                const api_failure f = failure_of(kind, base + "\"" + field + "\": " + deep + "}");
                EXPECT_EQ(f.status, 400) << field;
                EXPECT_EQ(f.code, "json_too_deep") << field;
                EXPECT_EQ(f.param, field);
            }
        }
    }
    // Deep in the places inside fields that hold values ('@').
    const std::vector<std::pair<std::string, std::string>> inner = {
        {R"({"messages": [{"role": "user", "content": @}]})", "messages"},
        {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": @}]}]})", "messages"},
        {R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": @}}]}]})", "messages"},
        {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": @, "function": {"name": "f"}}]}]})", "messages"},
        {R"({"messages": [{"role": "tool", "tool_call_id": @, "content": "x"}]})", "messages"},
        {R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": @}}]})", "tools"},
        {R"({"messages": [{"role": "user", "content": "a"}], "tool_choice": {"type": "function", "function": {"name": @}}})", "tool_choice"},
        {R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": @}}})", "response_format"},
        {R"({"messages": [{"role": "user", "content": "a"}], "stream": true, "stream_options": {"include_usage": @}})", "stream_options"},
        {R"({"messages": [{"role": "user", "content": "a"}], "logit_bias": {"5": @}})", "logit_bias"},
    };
    const std::string deep = nested(100000, false);
    for (const auto & [shape, field] : inner) {
        std::string body = shape;
        body.replace(body.find('@'), 1, deep);
        const api_failure f = failure_of(endpoint::chat, body);
        EXPECT_EQ(f.code, "json_too_deep") << shape;
        EXPECT_EQ(f.param, field) << shape;
    }
}

// Every top-level field the Responses translation reads, from its table of them.
std::set<std::string> fields_read_by_the_responses_translation() {
    std::ifstream in(SPECDEC_SERVE_RESPONSES_SOURCE);
    std::stringstream text;
    text << in.rdbuf();
    const std::string src = text.str();
    const std::regex read(R"re(\n    \{"([a-z_]+)", (?:nullptr|"))re");
    std::set<std::string> out;
    for (auto it = std::sregex_iterator(src.begin(), src.end(), read); it != std::sregex_iterator(); ++it) {
        out.insert((*it)[1].str());
    }
    return out;
}

TEST(ServeBounds, EveryResponsesFieldNestedDeepIsA400NamingIt) {
    const std::set<std::string> read = fields_read_by_the_responses_translation();
    ASSERT_GE(read.size(), 25u) << "the source's field table was not found: " << SPECDEC_SERVE_RESPONSES_SOURCE;
    for (const bool objects : {false, true}) {
        const std::string deep = nested(100000, objects);
        for (const std::string & field : read) {
            const std::string body = field == "input" ? R"({"input": )" + deep + "}" : R"({"input": "a", ")" + field + "\": " + deep + "}";
            try {
                parse_responses_request(body, limits());
                ADD_FAILURE() << field << " nested deep was taken";
            } catch (const api_error & e) {
                EXPECT_EQ(e.status(), 400) << field;
                EXPECT_EQ(e.code(), "json_too_deep") << field;
                EXPECT_EQ(e.param(), field);
            }
        }
    }
}

TEST(ServeBounds, TheDepthLimitIsExact) {
    // The body is level 1: a field may hold max_json_depth - 1 levels.
    const request_limits l = limits();
    const std::string at = R"({"prompt": "a", "unknown": )" + nested(l.max_json_depth - 1, false) + "}";
    EXPECT_EQ(failure_of(endpoint::completions, at).status, 0) << "at the limit: parsed (and the unknown field ignored)";
    const std::string past = R"({"prompt": "a", "unknown": )" + nested(l.max_json_depth, true) + "}";
    EXPECT_EQ(failure_of(endpoint::completions, past).code, "json_too_deep");
    EXPECT_EQ(failure_of(endpoint::completions, nested(l.max_json_depth + 1, false)).param, "") << "the body itself";
}

TEST(ServeBounds, ValuesAndContainersAreCountedWhileParsing) {
    request_limits l = limits();
    l.max_json_values = 1000;
    l.max_json_containers = 100;
    const auto values = [](size_t n, const char * each) {
        std::string s = R"({"prompt": "a", "x": [)";
        for (size_t i = 0; i < n; ++i) {
            s += i > 0 ? "," : "";
            s += each;
        }
        return s + "]}";
    };
    // The body's object, its prompt and the array: 3 besides the elements.
    EXPECT_EQ(failure_of(endpoint::completions, values(997, "0"), l).status, 0);
    const api_failure many = failure_of(endpoint::completions, values(998, "0"), l);
    EXPECT_EQ(many.code, "json_too_large");
    EXPECT_EQ(many.param, "x");
    EXPECT_EQ(failure_of(endpoint::completions, values(98, "{}"), l).status, 0); // with the body and the array: 100
    EXPECT_EQ(failure_of(endpoint::completions, values(99, "[]"), l).code, "json_too_large");
    // At the defaults: 8 MiB of empty objects (330 MB parsed) stops at the containers' bound.
    const api_failure big = failure_of(endpoint::completions, values((size_t(8) << 20) / 3, "{}"));
    EXPECT_EQ(big.code, "json_too_large");
}

TEST(ServeBounds, ToolCallArgumentsTextIsBoundedToo) {
    const std::string deep = json(nested(100000, false)).dump(); // JSON text in a string
    const api_failure f = failure_of(endpoint::chat, R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": )" + deep + "}}]}]}");
    EXPECT_EQ(f.code, "json_too_deep");
    EXPECT_EQ(f.param, "messages[0].tool_calls[0].function.arguments");
    EXPECT_EQ(json_text_depth(R"({"a": "[[[{{{", "b": ["\"]]", {"c": []}]})"), 4u) << "strings and escaped quotes skipped";
    EXPECT_EQ(json_text_depth("7"), 0u);
    EXPECT_EQ(json_text_depth(nested(100000, true)), 100000u);
}

TEST(ServeBounds, ErrorsDoNotEchoLargeValues) {
    const std::string huge(1 << 20, 'x');
    for (const std::string & body : {R"({"prompt": "a", "logit_bias": {"5": ")" + huge + "\"}}",
                                     R"({"prompt": "a", "logit_bias": {")" + huge + "\": true}}", // a text key (valid) with no bias
                                     R"({"prompt": "a", "logit_bias": [[")" + huge + "\", 1, 2]]}",
                                     R"({"prompt": "a", "logit_bias": {"5": )" + nested(100, true) + "}}",
                                     R"({"prompt": "a", "response_format": {"type": ")" + huge + "\"}}"}) {
        const api_failure f = failure_of(endpoint::completions, body);
        EXPECT_EQ(f.status, 400);
        EXPECT_LT(f.message.size(), 400u) << f.message.substr(0, 200);
    }
}

} // namespace
} // namespace cli::serve
