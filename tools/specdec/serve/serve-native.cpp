#include "serve-native.h"

#include "cli-common.h"
#include "serve-openai.h"

#include "specdec/specdec.hpp"

namespace cli::serve {

namespace {

using json = nlohmann::json;

// The body as a JSON object, with the server's depth and size bounds (parse_request's).
json object_of(std::string_view body, const request_limits & limits) {
    json j = parse_json_body(body, limits);
    if (!j.is_object()) {
        throw invalid_request("the body must be a JSON object", "", "invalid_json");
    }
    return j;
}

bool flag(const json & j, const char * field, bool fallback) {
    const auto it = j.find(field);
    if (it == j.end() || it->is_null()) {
        return fallback;
    }
    if (!it->is_boolean()) {
        throw invalid_request(std::string("'") + field + "' must be a boolean", field, "invalid_type");
    }
    return it->get<bool>();
}

bool valid_utf8(const std::string & s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || i + n > s.size()) {
            return false;
        }
        for (size_t k = 1; k < n; ++k) {
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) {
                return false;
            }
        }
        i += n;
    }
    return true;
}

} // namespace

json tokenize_answer(const service & svc, std::string_view body, const request_limits & limits) {
    const json j = object_of(body, limits);
    const auto content = j.find("content");
    if (content == j.end() || !content->is_string()) {
        throw invalid_request("'content' must be a string (the text to tokenize)", "content",
                              content == j.end() ? "missing_field" : "invalid_type");
    }
    const llama_vocab * vocab = llama_model_get_vocab(svc.model);
    std::vector<llama_token> tokens;
    try {
        tokens = specdec::tokenize(vocab, content->get_ref<const std::string &>(), flag(j, "add_special", false),
                                   flag(j, "parse_special", true));
    } catch (const specdec::error & e) {
        throw invalid_request(e.what(), "content");
    }
    if (!flag(j, "with_pieces", false)) {
        return {{"tokens", tokens}};
    }
    json out = json::array();
    for (const llama_token t : tokens) {
        const std::string piece = specdec::token_to_piece(vocab, t);
        out.push_back({{"id", t}, {"piece", valid_utf8(piece) ? json(piece) : json(std::vector<uint8_t>(piece.begin(), piece.end()))}});
    }
    return {{"tokens", out}};
}

json detokenize_answer(const service & svc, std::string_view body, const request_limits & limits) {
    const json j = object_of(body, limits);
    const auto tokens = j.find("tokens");
    if (tokens == j.end() || !tokens->is_array()) {
        throw invalid_request("'tokens' must be an array of token ids", "tokens", tokens == j.end() ? "missing_field" : "invalid_type");
    }
    std::vector<llama_token> ids;
    for (const json & t : *tokens) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
            throw invalid_request("'tokens' holds something other than a token id", "tokens", "invalid_type");
        }
        ids.push_back(static_cast<llama_token>(t.get<int64_t>()));
    }
    try {
        return {{"content", specdec::detokenize(llama_model_get_vocab(svc.model), ids, false, true)}};
    } catch (const specdec::error & e) {
        throw invalid_request(e.what(), "tokens");
    }
}

json apply_template_answer(const service & svc, std::string_view body, const request_limits & limits) {
    const parsed_request r = parse_request(endpoint::chat, body, limits);
    try {
        return {{"prompt", svc.chat->apply(r.messages, r.tools, chat_options_for(r, svc.chat_defaults)).prompt}};
    } catch (const std::exception & e) {
        throw invalid_request(e.what(), r.tools.functions.empty() ? "messages" : "tools");
    }
}

json props_answer(const service & svc) {
    const llama_vocab * vocab = llama_model_get_vocab(svc.model);
    const auto special = [&](llama_token t) { return t < 0 ? std::string() : specdec::token_to_piece(vocab, t); };
    const chat_options & c = svc.chat_defaults;
    const parsed_request defaults; // a request's sampling when it names none
    return {
        {"default_generation_settings",
         {{"n_ctx", svc.n_ctx},
          {"params",
           {{"n_predict", -1},
            {"temperature", defaults.temperature},
            {"top_k", defaults.top_k},
            {"top_p", defaults.top_p},
            {"min_p", defaults.min_p},
            {"speculative.n_max", svc.n_draft},
            {"reasoning_format", reasoning_format_name(c.reasoning)},
            {"reasoning_budget_tokens", c.reasoning_budget}}}}},
        {"total_slots", svc.n_slots},
        {"model_alias", svc.model_id},
        {"model_path", svc.model_path},
        {"chat_template", svc.chat->source()},
        {"bos_token", special(llama_vocab_bos(vocab))},
        {"eos_token", special(llama_vocab_eos(vocab))},
        {"modalities", {{"vision", false}, {"audio", false}}},
        {"build_info", std::string("specdec ") + specdec_version()},
        {"speculative", {{"strategy", svc.strategy}, {"n_draft", svc.n_draft}, {"accept", svc.accept == SPECDEC_ACCEPT_EXACT ? "exact" : "rejection"}}},
    };
}

json model_object(const std::string & id, int64_t created) {
    return {{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "specdec"}};
}

} // namespace cli::serve
