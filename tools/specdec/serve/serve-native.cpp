#include "serve-native.h"

#include "cli-common.h"
#include "serve-openai.h"
#include "serve-scheduler.h"
#include "serve-utf8.h"

#include "specdec/specdec.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

} // namespace

namespace {

// llama-server's fields that change the result and that this server does
// not implement, with the values that leave them off.
bool refuses(const json & v) {
    return !(v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() <= 0.0) ||
             ((v.is_array() || v.is_object() || v.is_string()) && v.empty()));
}

constexpr const char * unimplemented_native[] = {"post_sampling_probs", "t_max_predict_ms", "n_indent", "samplers",
                                                  "min_keep", "lora", "image_data", "multimodal_data"};

int64_t native_integer(const json & j, const char * field, int64_t fallback, int64_t lo, int64_t hi) {
    const auto it = j.find(field);
    if (it == j.end() || it->is_null()) {
        return fallback;
    }
    if (!it->is_number_integer() ||
        (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(hi) || (lo > 0 && it->get<uint64_t>() < static_cast<uint64_t>(lo))
                                  : it->get<int64_t>() < lo || it->get<int64_t>() > hi)) {
        throw invalid_request("'" + std::string(field) + "' must be an integer within [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]",
                              field);
    }
    return it->get<int64_t>();
}

json bytes_of(const std::string & piece) {
    json b = json::array();
    for (const unsigned char c : piece) {
        b.push_back(c);
    }
    return b;
}

// llama-server's completion_probabilities (pre-sampling log-probabilities).
json probabilities(const response_info & info, const specdec::sequence_result & lp, size_t n_top) {
    json out = json::array();
    for (size_t i = 0; i < lp.tokens.size(); ++i) {
        json top = json::array();
        for (size_t k = 0; k < n_top && i * n_top + k < lp.top_logprobs.size(); ++k) {
            const specdec_token_logprob & a = lp.top_logprobs[i * n_top + k];
            const std::string p = info.piece(a.token);
            top.push_back({{"id", a.token}, {"token", p}, {"logprob", a.logprob}, {"bytes", bytes_of(p)}});
        }
        const std::string piece = info.piece(lp.tokens[i]);
        out.push_back({{"id", lp.tokens[i]}, {"token", piece}, {"logprob", lp.logprobs[i]}, {"bytes", bytes_of(piece)},
                       {"top_logprobs", top}});
    }
    return out;
}

// llama-server's list of a request's logit biases: [{bias, token}], -infinity written as null.
json logit_biases(const specdec::request_params & p) {
    json out = json::array();
    for (size_t i = 0; i < p.n_logit_bias; ++i) {
        out.push_back({{"bias", std::isinf(p.logit_bias[i].bias) ? json() : json(p.logit_bias[i].bias)}, {"token", p.logit_bias[i].token}});
    }
    return out;
}

// llama-server's json_get_nested_values: for each path ("a/b/c"), the value
// it reaches through objects, keyed by the path; a path that reaches nothing is left out.
json projected(const std::vector<std::string> & paths, const json & j) {
    json out = json::object();
    for (const std::string & path : paths) {
        const json * at = &j;
        size_t from = 0;
        while (at != nullptr) {
            const size_t slash = std::min(path.find('/', from), path.size());
            const auto it = at->is_object() ? at->find(path.substr(from, slash - from)) : at->end();
            at = it != at->end() ? &*it : nullptr;
            if (slash == path.size()) {
                break;
            }
            from = slash + 1;
        }
        if (at != nullptr) {
            out[path] = *at;
        }
    }
    return out;
}

const char * stop_type(specdec_stop_reason stop) {
    switch (stop) {
        case SPECDEC_STOP_EOG:
            return "eos";
        case SPECDEC_STOP_STRING:
            return "word";
        case SPECDEC_STOP_BUDGET:
        case SPECDEC_STOP_CONTEXT:
            return "limit";
        default:
            return "none";
    }
}

} // namespace

parsed_request parse_native_completion(std::string_view body, const request_limits & limits, native_completion & out) {
    json j = object_of(body, limits);
    for (const char * field : unimplemented_native) {
        if (const auto it = j.find(field); it != j.end() && refuses(*it)) {
            throw invalid_request("'" + std::string(field) + "' is not supported by this server, and ignoring it would change the "
                                  "result; omit it",
                                  field, "unsupported_parameter");
        }
    }
    if (const auto it = j.find("response_fields"); it != j.end() && !it->is_null()) {
        if (!it->is_array() || !std::all_of(it->begin(), it->end(), [](const json & x) { return x.is_string(); })) {
            throw invalid_request("'response_fields' must be a list of field paths (strings such as \"generation_settings/n_predict\")",
                                  "response_fields", "invalid_type");
        }
        out.response_fields = it->get<std::vector<std::string>>();
    }
    const int64_t n_predict = native_integer(j, "n_predict", -1, -1, int64_t(1) << 24);
    if (n_predict >= 0 && !j.contains("max_tokens")) {
        j["max_tokens"] = n_predict;
    }
    out.n_probs = static_cast<int32_t>(native_integer(j, "n_probs", 0, 0, SPECDEC_MAX_TOP_LOGPROBS));
    out.return_tokens = flag(j, "return_tokens", false);
    flag(j, "cache_prompt", true);
    native_integer(j, "id_slot", -1, -1, static_cast<int64_t>(limits.n_slots) - 1);
    for (const char * openai : {"logprobs", "echo", "suffix"}) { // OpenAI's, which /completion answers in its own shape
        j.erase(openai);
    }
    parsed_request r = parse_request(endpoint::completions, j.dump(), limits);
    if (r.n != 1) {
        throw invalid_request("'n' must be 1: /completion answers one completion per prompt (/v1/completions takes n)", "n");
    }
    if (r.max_tokens < 0) {
        r.max_tokens = limits.n_ctx; // llama-server's -1: until the context is full
    }
    r.n_top_logprobs = out.n_probs; // every token's id comes with its log-probability to the stream
    return r;
}

parsed_request parse_native_infill(std::string_view body, const request_limits & limits, native_completion & out, infill_input & in) {
    json j = object_of(body, limits);
    const auto text = [&](const char * field, bool required) {
        const auto it = j.find(field);
        if (it == j.end() || it->is_null()) {
            if (required) {
                throw invalid_request("'" + std::string(field) + "' is required", field, "missing_field");
            }
            return std::string();
        }
        if (!it->is_string()) {
            throw invalid_request("'" + std::string(field) + "' must be a string", field, "invalid_type");
        }
        return it->get<std::string>();
    };
    in.prefix = text("input_prefix", true);
    in.suffix = text("input_suffix", true);
    in.prompt = text("prompt", false);
    if (const auto it = j.find("input_extra"); it != j.end() && !it->is_null()) {
        if (!it->is_array()) {
            throw invalid_request("'input_extra' must be an array of {\"filename\": string, \"text\": string}", "input_extra", "invalid_type");
        }
        for (const json & c : *it) {
            const auto t = c.is_object() ? c.find("text") : c.end();
            const auto f = c.is_object() ? c.find("filename") : c.end();
            if (!c.is_object() || t == c.end() || !t->is_string() || (f != c.end() && !f->is_string())) {
                throw invalid_request("'input_extra' holds " + c.dump().substr(0, 64) + "; each is {\"text\": string, \"filename\": string}",
                                      "input_extra", "invalid_type");
            }
            in.extra.push_back({f != c.end() ? f->get<std::string>() : "tmp", t->get<std::string>()});
        }
    }
    for (const char * field : {"input_prefix", "input_suffix", "input_extra"}) {
        j.erase(field);
    }
    j["prompt"] = in.prompt; // read as text here; the routes build the prompt's tokens (infill_prompt)
    return parse_native_completion(j.dump(), limits, out);
}

std::vector<llama_token> infill_prompt(const llama_vocab * vocab, const infill_input & in, int32_t n_batch, int32_t n_ctx) {
    const llama_token pre = llama_vocab_fim_pre(vocab);
    const llama_token suf = llama_vocab_fim_suf(vocab);
    const llama_token mid = llama_vocab_fim_mid(vocab);
    if (pre == LLAMA_TOKEN_NULL || suf == LLAMA_TOKEN_NULL || mid == LLAMA_TOKEN_NULL) {
        throw api_error(400, "invalid_request_error",
                        "this model cannot fill in the middle: its vocabulary has no FIM prefix, suffix and middle tokens", "",
                        "not_supported");
    }
    const auto tokens = [&](const std::string & t, const char * field) {
        try {
            return specdec::tokenize(vocab, t, false, false);
        } catch (const specdec::error & e) {
            throw invalid_request(e.what(), field);
        }
    };
    std::vector<llama_token> extra;
    if (const llama_token rep = llama_vocab_fim_rep(vocab); rep != LLAMA_TOKEN_NULL) {
        extra.push_back(rep);
        const std::vector<llama_token> name = tokens("myproject\n", "input_extra");
        extra.insert(extra.end(), name.begin(), name.end());
    }
    const llama_token sep = llama_vocab_fim_sep(vocab);
    for (const infill_input::chunk & c : in.extra) {
        const std::vector<llama_token> head = tokens(sep != LLAMA_TOKEN_NULL ? c.filename + "\n" : "\n\n--- snippet ---\n\n", "input_extra");
        if (sep != LLAMA_TOKEN_NULL) {
            extra.push_back(sep);
        }
        extra.insert(extra.end(), head.begin(), head.end());
        const std::vector<llama_token> body = tokens(c.text, "input_extra");
        extra.insert(extra.end(), body.begin(), body.end());
    }
    if (sep != LLAMA_TOKEN_NULL) {
        extra.push_back(sep);
        const std::vector<llama_token> name = tokens("filename\n", "input_extra");
        extra.insert(extra.end(), name.begin(), name.end());
    }
    std::vector<llama_token> prefix = tokens(in.prefix, "input_prefix");
    std::vector<llama_token> suffix = tokens(in.suffix, "input_suffix");
    const std::vector<llama_token> prompt = tokens(in.prompt, "prompt");
    // llama-server's split of one batch: 3/4 for the prefix's end, the rest for the suffix's start.
    const auto n_prefix = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(prefix.size()), 3 * (n_batch / 4)));
    const auto n_suffix = static_cast<size_t>(std::min<int64_t>(
        static_cast<int64_t>(suffix.size()), std::max<int64_t>(0, n_batch / 4 - (2 + static_cast<int64_t>(prompt.size())))));
    const auto n_extra = static_cast<size_t>(std::min<int64_t>(std::max<int64_t>(0, int64_t(n_ctx) - n_batch + 2), static_cast<int64_t>(extra.size())));
    prefix.erase(prefix.begin(), prefix.end() - static_cast<std::ptrdiff_t>(n_prefix));
    suffix.resize(n_suffix);
    std::vector<llama_token> out(extra.end() - static_cast<std::ptrdiff_t>(n_extra), extra.end());
    if (llama_vocab_get_add_bos(vocab)) {
        out.push_back(llama_vocab_bos(vocab));
    }
    out.push_back(pre);
    out.insert(out.end(), prefix.begin(), prefix.end());
    out.insert(out.end(), prompt.begin(), prompt.end());
    out.push_back(suf);
    out.insert(out.end(), suffix.begin(), suffix.end());
    out.push_back(mid);
    return out;
}

json native_settings(const specdec::request_params & p, bool stream, int32_t n_probs, const std::vector<std::string> & stop) {
    return {{"n_predict", p.n_predict},
            {"seed", p.seed},
            {"temperature", p.temperature},
            {"top_k", p.top_k},
            {"top_p", p.top_p},
            {"min_p", p.min_p},
            {"repeat_last_n", p.repeat_last_n},
            {"repeat_penalty", p.repeat_penalty},
            {"presence_penalty", p.presence_penalty},
            {"frequency_penalty", p.frequency_penalty},
            {"ignore_eos", p.ignore_eog},
            {"logit_bias", logit_biases(p)},
            {"stream", stream},
            {"n_probs", n_probs},
            {"stop", stop},
            {"grammar", p.grammar != nullptr ? p.grammar : ""},
            {"speculative.n_max", p.n_draft}};
}

json native_completion_body(const native_completion & nc, const response_info & info, const finished_request & f,
                            const std::string & content, const std::string & prompt, const std::string & stopping_word,
                            bool stream) {
    const specdec::request_result & r = *f.result;
    const specdec::sequence_result & out = r.output;
    const size_t n_out = out.tokens.size();
    const double total_ms = static_cast<double>(r.times.t_total_us) / 1e3;
    const double prompt_ms = r.times.t_first_token_us >= 0 ? static_cast<double>(r.times.t_first_token_us) / 1e3 : total_ms;
    const double predicted_ms = std::max(total_ms - prompt_ms, 0.0);
    const size_t prompt_n = f.n_prompt - std::min(f.n_prompt, r.n_prompt_cached);
    const auto per = [](double ms, size_t n) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
    const auto rate = [](double ms, size_t n) { return ms > 0.0 ? 1e3 * static_cast<double>(n) / ms : 0.0; };
    // The first token comes with the prompt (prompt_ms): predicted_ms is the time of the others.
    const size_t n_later = n_out > 0 ? n_out - 1 : 0;
    json timings = {{"cache_n", r.n_prompt_cached},
                    {"prompt_n", prompt_n},
                    {"prompt_ms", prompt_ms},
                    {"prompt_per_token_ms", per(prompt_ms, prompt_n)},
                    {"prompt_per_second", rate(prompt_ms, prompt_n)},
                    {"predicted_n", n_out},
                    {"predicted_ms", predicted_ms},
                    {"predicted_per_token_ms", per(predicted_ms, n_later)},
                    {"predicted_per_second", rate(predicted_ms, n_later)}};
    if (out.stats.n_drafted > 0) {
        timings["draft_n"] = out.stats.n_drafted;
        timings["draft_n_accepted"] = out.stats.n_accepted;
    }
    json j = {{"index", info.index},
              {"content", content},
              {"tokens", nc.return_tokens && !stream ? json(out.tokens) : json::array()},
              {"id_slot", r.seq_id},
              {"stop", true},
              {"model", info.model},
              {"tokens_predicted", n_out},
              {"tokens_evaluated", f.n_prompt},
              {"generation_settings", nc.settings},
              {"prompt", prompt},
              {"has_new_line", out.text.find('\n') != std::string::npos},
              {"truncated", false},
              {"stop_type", stop_type(out.stop)},
              {"stopping_word", stopping_word},
              {"tokens_cached", f.n_prompt + n_out},
              {"timings", timings}};
    if (nc.n_probs > 0 && !stream) {
        j["completion_probabilities"] = probabilities(info, out, static_cast<size_t>(nc.n_probs));
    }
    return nc.response_fields.empty() ? j : projected(nc.response_fields, j);
}

json native_chunk_body(const native_completion & nc, const response_info & info, std::string_view content,
                       const specdec::sequence_result & lp, size_t n_predicted, size_t n_prompt) {
    json j = {{"index", info.index},
              {"content", content},
              {"tokens", nc.return_tokens ? json(lp.tokens) : json::array()},
              {"stop", false},
              {"id_slot", -1},
              {"tokens_predicted", n_predicted},
              {"tokens_evaluated", n_prompt}};
    if (nc.n_probs > 0 && !lp.tokens.empty()) {
        j["completion_probabilities"] = probabilities(info, lp, static_cast<size_t>(nc.n_probs));
    }
    return j;
}

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
    const chat_options options = chat_options_for(r, svc.chat_defaults);
    try {
        return {{"prompt", svc.chat->apply(r.messages, r.tools, options).prompt}};
    } catch (const std::exception & e) {
        throw invalid_request(e.what(), r.tools.functions.empty() ? "messages" : "tools");
    }
}

json slots_answer(const service & svc) {
    json out = json::array();
    const std::vector<slot_view> slots = svc.sched->slots();
    for (size_t i = 0; i < slots.size(); ++i) {
        const slot_view & v = slots[i];
        json slot = {{"id", i}, {"n_ctx", svc.n_ctx}, {"speculative", svc.strategy != "none"}, {"is_processing", v.processing}};
        if (v.id_task != 0) {
            slot["id_task"] = v.id_task;
            slot["n_prompt_tokens"] = v.n_prompt;
            slot["n_prompt_tokens_cache"] = v.n_prompt_cached;
            slot["params"] = native_settings(v.params, false, std::max(v.params.n_top_logprobs, 0), {});
            const int64_t remain = static_cast<int64_t>(v.params.n_predict) - static_cast<int64_t>(v.n_decoded);
            slot["next_token"] = json::array({{{"has_next_token", v.processing},
                                               {"has_new_line", false},
                                               {"n_remain", v.processing ? remain : -1}, // an idle slot has no budget left over
                                               {"n_decoded", v.processing ? v.n_decoded : 0}}});
        }
        out.push_back(std::move(slot));
    }
    return out;
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
            {"seed", svc.seed.value_or(UINT32_MAX)}, // llama-server's LLAMA_DEFAULT_SEED: a random one per request
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

json model_object(const service & svc, const std::string & id, int64_t created) {
    const llama_vocab * vocab = llama_model_get_vocab(svc.model);
    return {{"id", id},
            {"aliases", svc.model_aliases.empty() ? std::vector<std::string>{svc.model_id} : svc.model_aliases},
            {"tags", svc.model_tags},
            {"object", "model"},
            {"created", created},
            {"owned_by", "specdec"},
            {"meta",
             {{"vocab_type", llama_vocab_type(vocab)},
              {"n_vocab", llama_vocab_n_tokens(vocab)},
              {"n_ctx", svc.n_ctx},
              {"n_ctx_train", llama_model_n_ctx_train(svc.model)},
              {"n_embd", llama_model_n_embd(svc.model)},
              {"n_params", llama_model_n_params(svc.model)},
              {"size", llama_model_size(svc.model)},
              {"ftype", llama_ftype_name(llama_model_ftype(svc.model))}}}};
}

} // namespace cli::serve
