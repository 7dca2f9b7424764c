#include "cmd-generate.h"

#include "cli-common.h"
#include "json-text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

namespace cli {

void add_generate_command(CLI::App & app, generate_options & o) {
    CLI::App * cmd = app.add_subcommand("generate", "generate text, speculatively unless --spec none");
    cmd->add_option("-m,--model", o.model, "target model (GGUF)")->required()->check(CLI::ExistingFile);
    cmd->add_option("--model-draft", o.draft_model, "draft model (GGUF) for eagle3, dflash, dspark, draft")->check(CLI::ExistingFile);
    cmd->add_option("--spec", o.spec,
                    "auto (from the GGUF metadata), none, mtp, eagle3, dflash, dspark, draft, ngram-simple, "
                    "ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache")
        ->capture_default_str();
    cmd->add_option("-p,--prompt", o.prompts, "prompt; repeat for several sequences generated in one batch");
    cmd->add_option("-f,--file", o.prompt_file, "read one more prompt from a file")->check(CLI::ExistingFile);
    cmd->add_option("-n,--n-predict", o.n_predict, "most tokens to generate per sequence")->check(CLI::NonNegativeNumber)->capture_default_str();
    cmd->add_option("-c,--ctx-size", o.n_ctx, "context size per sequence")->check(CLI::Range(16u, 1u << 20))->capture_default_str();
    cmd->add_option("-t,--threads", o.n_threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
    cmd->add_option("--n-draft", o.n_draft, "tokens drafted per step, or auto: chosen per step and sequence for speed")
        ->check(draft_length_validator())
        ->capture_default_str();
    cmd->add_option("--draft-max", o.n_draft_max, "the most tokens a step may draft (default: --n-draft, or 8 with auto)")
        ->check(CLI::Range(1, SPECDEC_MAX_DRAFT));
    cmd->add_option("--draft-min", o.n_draft_min, "drop shorter proposals")->check(CLI::NonNegativeNumber);
    cmd->add_option("--draft-p-min", o.p_min, "stop drafting below this draft probability")->check(CLI::Range(0.0f, 1.0f));
    cmd->add_option("--temp", o.temperature, "temperature; 0 = greedy")->capture_default_str();
    cmd->add_option("--top-k", o.top_k, "top-k sampling (0: off)");
    cmd->add_option("--top-p", o.top_p, "top-p sampling (1: off)");
    cmd->add_option("--min-p", o.min_p, "min-p sampling (0: off)");
    cmd->add_option("-s,--seed", o.seed, "sampling seed (sequence i uses seed + i)");
    cmd->add_option("--stop", o.stop, "stop when the text contains this string; repeatable");
    cmd->add_flag("--ignore-eos", o.ignore_eos, "keep generating past end-of-generation tokens");
    cmd->add_flag("--json", o.json, "print the texts and statistics as JSON on stdout");
    add_device_options(cmd, o.devices);
}

namespace {

// "none" -> plain decoding; "auto" -> from the metadata; else a strategy name.
bool resolve_strategy(const generate_options & o, specdec_strategy & out) {
    const char * draft = o.draft_model.empty() ? nullptr : o.draft_model.c_str();
    if (o.spec == "none") {
        if (draft != nullptr) {
            throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--spec none takes no draft model");
        }
        return false;
    }
    if (o.spec == "auto") {
        const specdec_status st = specdec_detect_strategy(o.model.c_str(), draft, &out);
        if (st == SPECDEC_STATUS_MODEL_UNSUPPORTED && draft == nullptr) {
            std::fprintf(stderr, "specdec: no drafter found in the model's metadata; decoding without speculation\n");
            return false;
        }
        if (st != SPECDEC_STATUS_OK) {
            throw specdec::error(st, specdec_last_error());
        }
    } else if (specdec_strategy_from_name(o.spec.c_str(), &out) != SPECDEC_STATUS_OK) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, specdec_last_error());
    }
    const specdec_status st = specdec_check_pair(o.model.c_str(), draft, out);
    if (st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, specdec_last_error());
    }
    return true;
}

const char * stop_name(specdec_stop_reason r) {
    switch (r) {
        case SPECDEC_STOP_BUDGET:   return "budget";
        case SPECDEC_STOP_EOG:      return "eog";
        case SPECDEC_STOP_STRING:   return "stop_string";
        case SPECDEC_STOP_CONTEXT:  return "context_full";
        case SPECDEC_STOP_CALLBACK: return "callback";
        case SPECDEC_STOP_ERROR:    return "error";
        case SPECDEC_STOP_CANCELLED: return "cancelled";
        case SPECDEC_STOP_INVALID:
        case SPECDEC_STOP_MAX_ENUM: break;
    }
    return "unknown";
}

nlohmann::json to_json(const specdec::generation_result & r, const char * strategy, int32_t n_draft, bool adaptive) {
    nlohmann::json out;
    out["strategy"] = strategy;
    out["n_draft"] = n_draft;
    out["adaptive"] = adaptive;
    uint64_t generated = 0;
    for (const auto & s : r.sequences) {
        const auto & st = s.stats;
        nlohmann::json by_pos = nlohmann::json::array();
        for (size_t i = 0; i < SPECDEC_MAX_DRAFT && st.n_proposed_at[i] > 0; ++i) {
            by_pos.push_back(static_cast<double>(st.n_accepted_at[i]) / static_cast<double>(st.n_proposed_at[i]));
        }
        out["sequences"].push_back({
            {"text", s.text},
            {"tokens", s.tokens},
            {"stop", stop_name(s.stop)},
            {"stats",
             {{"generated", st.n_generated},
              {"steps", st.n_steps},
              {"drafted", st.n_drafted},
              {"accepted", st.n_accepted},
              {"acceptance_rate", st.n_drafted > 0 ? static_cast<double>(st.n_accepted) / static_cast<double>(st.n_drafted) : 0.0},
              {"tokens_per_step", st.n_steps > 0 ? static_cast<double>(st.n_generated) / static_cast<double>(st.n_steps) : 0.0},
              {"acceptance_by_position", by_pos}}},
        });
        generated += st.n_generated;
    }
    const auto & t = r.times;
    const int64_t decode_us = t.t_total_us - t.t_prefill_us;
    auto ms = [](int64_t us) { return static_cast<double>(us) / 1e3; };
    out["times_ms"] = {
        {"prefill", ms(t.t_prefill_us)},
        {"verify", ms(t.t_verify_us)},
        {"draft", ms(t.t_draft_us)},
        {"bookkeeping", ms(decode_us - t.t_verify_us - t.t_draft_us)},
        {"total", ms(t.t_total_us)},
    };
    out["tokens_per_second"] = decode_us > 0 ? static_cast<double>(generated) * 1e6 / static_cast<double>(decode_us) : 0.0;
    return out;
}

void print_summary(const nlohmann::json & j) {
    for (size_t i = 0; i < j["sequences"].size(); ++i) {
        const auto & st = j["sequences"][i]["stats"];
        std::fprintf(stderr, "specdec: seq %zu: %llu tokens in %llu steps, drafted %llu, accepted %llu (%.1f%%), stop: %s\n", i,
                     st["generated"].get<unsigned long long>(), st["steps"].get<unsigned long long>(),
                     st["drafted"].get<unsigned long long>(), st["accepted"].get<unsigned long long>(),
                     100.0 * st["acceptance_rate"].get<double>(), j["sequences"][i]["stop"].get<std::string>().c_str());
    }
    const auto & t = j["times_ms"];
    std::fprintf(stderr, "specdec: %s, %.2f tokens/s; ms: prefill %.1f, verify %.1f, draft %.1f, bookkeeping %.1f\n",
                 j["strategy"].get<std::string>().c_str(), j["tokens_per_second"].get<double>(), t["prefill"].get<double>(),
                 t["verify"].get<double>(), t["draft"].get<double>(), t["bookkeeping"].get<double>());
}

} // namespace

int run_generate(const generate_options & o) {
    std::vector<std::string> texts = o.prompts;
    if (!o.prompt_file.empty()) {
        texts.push_back(read_file(o.prompt_file));
    }
    if (texts.empty()) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "give a prompt with -p or -f");
    }
    // Metadata first: llama.cpp's loader aborts on some malformed files.
    for (const std::string * path : {&o.model, &o.draft_model}) {
        specdec_model_info info{};
        if (!path->empty() && specdec_inspect(path->c_str(), &info) != SPECDEC_STATUS_OK) {
            throw specdec::error(SPECDEC_STATUS_MALFORMED_FILE, specdec_last_error());
        }
    }
    specdec_strategy strategy = SPECDEC_STRATEGY_MTP;
    const bool speculative = resolve_strategy(o, strategy);
    const auto n_seq = static_cast<uint32_t>(texts.size());

    specdec::session_params sp = specdec_session_default_params();
    sp.strategy = strategy;
    sp.n_seq = n_seq;
    const bool adaptive = o.n_draft == "auto";
    const int32_t n_fixed = adaptive ? 0 : std::stoi(o.n_draft); // validated by draft_length_validator
    if (!adaptive && o.n_draft_max > 0 && n_fixed > o.n_draft_max) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--n-draft " + o.n_draft + " exceeds --draft-max " +
                                                                  std::to_string(o.n_draft_max));
    }
    const int32_t n_draft_max = o.n_draft_max > 0 ? o.n_draft_max : adaptive ? auto_draft_max : n_fixed;
    sp.n_draft_max = n_draft_max;
    sp.n_draft_min = o.n_draft_min;
    sp.p_min = o.p_min;

    add_rpc_servers(o.devices);
    llama_model_ptr target_model = load_model(o.model, speculative && strategy == SPECDEC_STRATEGY_MTP, o.devices.target);
    llama_context_params tp = context_params(o.n_ctx, n_seq, o.n_threads);
    if (speculative && (llama_model_is_recurrent(target_model.get()) || llama_model_is_hybrid(target_model.get()))) {
        tp.n_rs_seq = static_cast<uint32_t>(n_draft_max); // rejected drafts roll the recurrent state back
    }
    llama_context_ptr target(llama_init_from_model(target_model.get(), tp));
    if (!target) {
        throw specdec::error(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp could not create the target context (run with -v)");
    }

    std::vector<std::vector<llama_token>> prompts;
    for (const auto & text : texts) {
        prompts.push_back(tokenize(target_model.get(), text));
    }

    specdec::generate_params gp = specdec_generate_default_params();
    gp.n_predict = o.n_predict;
    gp.temperature = o.temperature;
    gp.top_k = o.top_k;
    gp.top_p = o.top_p;
    gp.min_p = o.min_p;
    gp.seed = o.seed;
    gp.ignore_eog = o.ignore_eos;
    std::vector<const char *> stops;
    for (const auto & s : o.stop) {
        stops.push_back(s.c_str());
    }
    gp.stop_strings = stops.data();
    gp.n_stop_strings = stops.size();

    // One sequence streams to stdout as it is generated; several are printed
    // at the end, with a token count on stderr meanwhile when it is a terminal.
    const bool stream = !o.json && n_seq == 1;
    const bool progress = !stream && isatty(STDERR_FILENO);
    uint64_t n_emitted = 0;
    specdec::token_callback on_token;
    if (stream) {
        on_token = [](llama_seq_id, llama_token, std::string_view piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return true;
        };
    } else if (progress) {
        on_token = [&n_emitted](llama_seq_id, llama_token, std::string_view) {
            if (++n_emitted % 16 == 0) {
                std::fprintf(stderr, "\rgenerated %llu tokens", static_cast<unsigned long long>(n_emitted));
            }
            return true;
        };
    }

    specdec::generation_result result;
    const char * name = "none";
    int32_t n_draft = 0;
    if (speculative) {
        llama_model_ptr draft_model;
        if (!o.draft_model.empty()) {
            draft_model = load_model(o.draft_model, false, o.devices.draft);
        }
        llama_context_ptr draft;
        if (specdec_strategy_needs_draft_context(strategy)) {
            draft = specdec::make_draft_context(target.get(), draft_model.get(), sp, context_params(o.n_ctx, n_seq, o.n_threads));
        }
        specdec::session session(target.get(), draft.get(), sp);
        // The drafter may have lowered n_draft_max (a DFlash block is shorter, say).
        gp.n_draft = adaptive ? SPECDEC_N_DRAFT_AUTO : std::min(n_fixed, session.params().n_draft_max);
        result = specdec::generate(session, prompts, gp, on_token);
        name = specdec_strategy_name(strategy);
        n_draft = session.params().n_draft_max;
    } else {
        result = specdec::generate_plain(target.get(), prompts, gp, on_token);
    }

    if (progress) {
        std::fputs("\r                                \r", stderr);
    }
    const nlohmann::json j = to_json(result, name, n_draft, speculative && adaptive);
    if (o.json) {
        std::printf("%s\n", json_text(j).c_str());
        return exit_ok;
    }
    if (stream) {
        std::printf("\n");
    }
    print_summary(j);
    if (!stream && !o.json) {
        for (size_t i = 0; i < result.sequences.size(); ++i) {
            const std::string & text = result.sequences[i].text;
            std::printf("%s", i > 0 ? "\n" : "");
            std::fwrite(text.data(), 1, text.size(), stdout); // it may hold NUL bytes
            std::printf("\n");
        }
    }
    return exit_ok;
}

} // namespace cli
