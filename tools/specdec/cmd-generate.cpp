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
    add_decoder_options(cmd, o.decoder);
    cmd->add_option("-p,--prompt", o.prompts, "prompt; repeat for several sequences generated in one batch");
    cmd->add_option("-f,--file", o.prompt_file, "read one more prompt from a file")->check(CLI::ExistingFile);
    cmd->add_option("-n,--n-predict", o.n_predict, "most tokens to generate per sequence")->check(CLI::NonNegativeNumber)->capture_default_str();
    cmd->add_option("--temp", o.temperature, "temperature; 0 = greedy")->capture_default_str();
    cmd->add_option("--top-k", o.top_k, "top-k sampling (0: off)");
    cmd->add_option("--top-p", o.top_p, "top-p sampling (1: off)");
    cmd->add_option("--min-p", o.min_p, "min-p sampling (0: off)");
    cmd->add_option("-s,--seed", o.seed, "sampling seed (sequence i uses seed + i)");
    cmd->add_option("--accept", o.accept, accept_help)->check(CLI::IsMember({"exact", "rejection"}))->capture_default_str();
    cmd->add_option("--stop", o.stop, "stop when the text contains this string; repeatable");
    cmd->add_flag("--ignore-eos", o.ignore_eos, "keep generating past end-of-generation tokens");
    cmd->add_flag("--json", o.json, "print the texts and statistics as JSON on stdout");
}

namespace {

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

nlohmann::json to_json(const specdec::generation_result & r, const char * strategy, int32_t n_draft, bool adaptive,
                       const specdec::generate_params & gp) {
    nlohmann::json out;
    out["strategy"] = strategy;
    out["accept"] = accept_mode_name(gp.accept);
    out["n_draft"] = n_draft;
    out["adaptive"] = adaptive;
    out["exact_kernels"] = specdec_exact_kernels();
    uint64_t decoded = 0; // see decoded_tokens
    for (const auto & s : r.sequences) {
        const auto & st = s.stats;
        nlohmann::json by_pos = nlohmann::json::array();
        for (size_t i = 0; i < SPECDEC_MAX_DRAFT && st.n_reached_at[i] > 0; ++i) {
            by_pos.push_back(static_cast<double>(st.n_accepted_at[i]) / static_cast<double>(st.n_reached_at[i]));
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
        decoded += decoded_tokens(st);
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
    out["tokens_per_second"] = decode_us > 0 ? static_cast<double>(decoded) * 1e6 / static_cast<double>(decode_us) : 0.0;
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
    const auto n_seq = static_cast<uint32_t>(texts.size());
    decoder d = load_decoder(o.decoder, n_seq);

    std::vector<std::vector<llama_token>> prompts;
    for (const auto & text : texts) {
        prompts.push_back(tokenize(d.target_model.get(), text));
    }

    specdec::generate_params gp = specdec_generate_default_params();
    gp.n_predict = o.n_predict;
    gp.temperature = o.temperature;
    gp.top_k = o.top_k;
    gp.top_p = o.top_p;
    gp.min_p = o.min_p;
    gp.seed = o.seed;
    gp.accept = accept_mode_of(o.accept);
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
    if (d.session) {
        gp.n_draft = d.n_draft;
        result = specdec::generate(*d.session, prompts, gp, on_token);
    } else {
        result = specdec::generate_plain(d.target.get(), prompts, gp, on_token);
    }
    const int32_t n_draft = d.session ? d.session->params().n_draft_max : 0;

    if (progress) {
        std::fputs("\r                                \r", stderr);
    }
    const nlohmann::json j = to_json(result, d.strategy_name(), n_draft, d.adaptive, gp);
    if (o.json) {
        std::printf("%s\n", json_text(j).c_str());
        return exit_ok;
    }
    if (stream) {
        std::printf("\n");
        std::fflush(stdout); // before the summary on stderr, also when stdout is a file or a pipe
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
