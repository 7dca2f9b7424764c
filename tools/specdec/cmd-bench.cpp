#include "cmd-bench.h"

#include "cli-common.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <unistd.h>

namespace cli {

void add_bench_command(CLI::App & app, bench_options & o) {
    CLI::App * cmd = app.add_subcommand("bench", "measure speculative decoding against plain decoding of the same target");
    cmd->add_option("-m,--model", o.model, "target model (GGUF)")->required()->check(CLI::ExistingFile);
    cmd->add_option("--model-draft", o.draft_model, "draft model (GGUF) for eagle3, dflash, dspark, draft")->check(CLI::ExistingFile);
    cmd->add_option("--spec", o.specs, "strategies to compare (repeatable); default: the one the files' metadata implies");
    cmd->add_option("--n-draft", o.n_drafts, "draft lengths to sweep (repeatable)")->check(CLI::Range(1, SPECDEC_MAX_DRAFT));
    cmd->add_option("-p,--prompt", o.prompt, "prompt text");
    cmd->add_option("-n,--n-predict", o.n_predict, "tokens generated per run")->check(CLI::Range(1, 1 << 16))->capture_default_str();
    cmd->add_option("-r,--repeats", o.repeats, "rounds; medians are reported")->check(CLI::Range(1, 1000))->capture_default_str();
    cmd->add_option("-c,--ctx-size", o.n_ctx, "context size")->check(CLI::Range(64u, 1u << 20))->capture_default_str();
    cmd->add_option("-t,--threads", o.n_threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
    cmd->add_option("--json", o.json_path, "write the results as JSON to this file");
    cmd->add_option("--upstream", o.upstream,
                    "llama.cpp's speculative-simple (built as bin/specdec-upstream-reference) to run as the reference loop")
        ->check(CLI::ExistingFile);
}

namespace {

struct config {
    std::string      name;     // "plain" or "<strategy> n=<k>"
    specdec_strategy strategy = SPECDEC_STRATEGY_MTP;
    int32_t          n_draft  = 0; // 0: plain decoding
};

struct run_result {
    double tokens_per_second = 0;
    double acceptance        = 0;
    double tokens_per_step   = 0;
    double verify_share      = 0; // of decode time (prefill excluded)
    double draft_share       = 0;
    double bookkeeping_share = 0;
    double step_cost_us      = 0; // target verification + drafting per step: what an ideal loop pays
    std::vector<double> by_position;
    std::vector<llama_token> tokens;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

run_result measure(const specdec::generation_result & g) {
    const auto & s = g.sequences[0];
    const auto & st = s.stats;
    const auto & t = g.times;
    const double decode_us = static_cast<double>(std::max<int64_t>(1, t.t_total_us - t.t_prefill_us));
    run_result r;
    r.tokens_per_second = static_cast<double>(st.n_generated) * 1e6 / decode_us;
    r.acceptance = st.n_drafted > 0 ? static_cast<double>(st.n_accepted) / static_cast<double>(st.n_drafted) : 0.0;
    r.tokens_per_step = st.n_steps > 0 ? static_cast<double>(st.n_generated) / static_cast<double>(st.n_steps) : 0.0;
    r.verify_share = static_cast<double>(t.t_verify_us) / decode_us;
    r.draft_share = static_cast<double>(t.t_draft_us) / decode_us;
    r.bookkeeping_share = std::max(0.0, 1.0 - r.verify_share - r.draft_share);
    r.step_cost_us = st.n_steps > 0 ? static_cast<double>(t.t_verify_us + t.t_draft_us) / static_cast<double>(st.n_steps) : 0.0;
    for (size_t i = 0; i < SPECDEC_MAX_DRAFT && st.n_proposed_at[i] > 0; ++i) {
        r.by_position.push_back(static_cast<double>(st.n_accepted_at[i]) / static_cast<double>(st.n_proposed_at[i]));
    }
    r.tokens = s.tokens;
    return r;
}

// Quotes a value for /bin/sh.
std::string shell_quote(const std::string & s) {
    std::string out = "'";
    for (char c : s) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

// Runs upstream's speculative-simple with the same model, strategy, draft
// length, prompt, budget and threads; returns its decode speed in tokens/s.
double run_upstream(const bench_options & o, specdec_strategy strategy, int32_t n_draft, int32_t threads) {
    const std::string type = strategy == SPECDEC_STRATEGY_DRAFT ? "draft-simple"
                             : std::string(specdec_strategy_name(strategy)).rfind("ngram", 0) == 0
                                 ? specdec_strategy_name(strategy)
                                 : "draft-" + std::string(specdec_strategy_name(strategy));
    std::string cmd = shell_quote(o.upstream) + " -m " + shell_quote(o.model) + " --spec-type " + type +
                      " --spec-draft-n-max " + std::to_string(n_draft) + " -p " + shell_quote(o.prompt) + " -n " +
                      std::to_string(o.n_predict) + " -t " + std::to_string(threads) + " -c " + std::to_string(o.n_ctx) +
                      " --temp 0 --top-k 1 2>&1";
    if (strategy != SPECDEC_STRATEGY_MTP && !o.draft_model.empty() && specdec_strategy_needs_draft_context(strategy)) {
        cmd.insert(cmd.size() - 5, " --spec-draft-model " + shell_quote(o.draft_model));
    }
    FILE * pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot run " + o.upstream);
    }
    std::string output;
    char buf[4096];
    while (std::fgets(buf, sizeof(buf), pipe) != nullptr) {
        output += buf;
    }
    const int rc = pclose(pipe);
    const size_t at = output.find("decoded ");
    const size_t speed = output.find("speed:", at == std::string::npos ? 0 : at);
    if (rc != 0 || at == std::string::npos || speed == std::string::npos) {
        const std::string why = rc != 0 ? "the upstream reference failed (wait status " + std::to_string(rc) + ")"
                                        : std::string("the upstream reference printed no decode speed");
        throw specdec::error(SPECDEC_STATUS_NATIVE_FAILURE,
                             why + "; its output ends with: " + output.substr(output.size() > 400 ? output.size() - 400 : 0));
    }
    return std::atof(output.c_str() + speed + 6);
}

std::vector<specdec_strategy> strategies_of(const bench_options & o) {
    const char * draft = o.draft_model.empty() ? nullptr : o.draft_model.c_str();
    std::vector<specdec_strategy> out;
    if (o.specs.empty()) {
        specdec_strategy s{};
        if (specdec_detect_strategy(o.model.c_str(), draft, &s) != SPECDEC_STATUS_OK) {
            throw specdec::error(SPECDEC_STATUS_MODEL_UNSUPPORTED, std::string(specdec_last_error()) + " (name strategies with --spec)");
        }
        out.push_back(s);
    }
    for (const auto & name : o.specs) {
        specdec_strategy s{};
        if (specdec_strategy_from_name(name.c_str(), &s) != SPECDEC_STATUS_OK) {
            throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, specdec_last_error());
        }
        out.push_back(s);
    }
    for (specdec_strategy s : out) {
        const bool uses_draft_model = specdec_strategy_needs_draft_context(s) && s != SPECDEC_STRATEGY_MTP;
        const specdec_status st = specdec_check_pair(o.model.c_str(), uses_draft_model ? draft : nullptr, s);
        if (st != SPECDEC_STATUS_OK) {
            throw specdec::error(st, specdec_last_error());
        }
    }
    return out;
}

} // namespace

int run_bench(const bench_options & o) {
    const std::vector<specdec_strategy> strategies = strategies_of(o);
    const int32_t n_draft_top = *std::max_element(o.n_drafts.begin(), o.n_drafts.end());
    const bool any_mtp = std::find(strategies.begin(), strategies.end(), SPECDEC_STRATEGY_MTP) != strategies.end();

    llama_model_ptr target_model = load_model(o.model, any_mtp);
    llama_model_ptr draft_model;
    if (!o.draft_model.empty()) {
        draft_model = load_model(o.draft_model, false);
    }
    llama_context_params cp = context_params(o.n_ctx, 1, o.n_threads);
    const int32_t threads = cp.n_threads;
    if (llama_model_is_recurrent(target_model.get()) || llama_model_is_hybrid(target_model.get())) {
        cp.n_rs_seq = static_cast<uint32_t>(n_draft_top);
    }
    llama_context_ptr target(llama_init_from_model(target_model.get(), cp));
    if (!target) {
        throw specdec::error(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp could not create the target context (run with -v)");
    }
    // One draft context per strategy, sized for the longest draft.
    std::map<specdec_strategy, llama_context_ptr> drafts;
    for (specdec_strategy s : strategies) {
        if (specdec_strategy_needs_draft_context(s)) {
            specdec::session_params sp = specdec_session_default_params();
            sp.strategy = s;
            sp.n_draft_max = n_draft_top;
            drafts[s] = specdec::make_draft_context(target.get(), s == SPECDEC_STRATEGY_MTP ? nullptr : draft_model.get(), sp, cp);
        }
    }
    const std::vector<std::vector<llama_token>> prompts = {tokenize(target_model.get(), o.prompt)};

    std::vector<config> configs = {{"plain", SPECDEC_STRATEGY_MTP, 0}};
    for (specdec_strategy s : strategies) {
        for (int32_t n : o.n_drafts) {
            configs.push_back({std::string(specdec_strategy_name(s)) + " n=" + std::to_string(n), s, n});
        }
    }

    specdec::generate_params gp = specdec_generate_default_params();
    gp.n_predict = o.n_predict;
    gp.ignore_eog = true; // every run generates the same number of tokens

    // One unmeasured run warms caches and threads; then rounds interleave the
    // configurations, so slow drift of the machine affects all of them alike.
    specdec::generate_plain(target.get(), prompts, gp);
    const bool progress = isatty(STDERR_FILENO);
    std::vector<std::vector<run_result>> runs(configs.size());
    std::vector<std::vector<double>> upstream_tps(configs.size());
    std::vector<int32_t> effective(configs.size(), 0);
    for (int32_t round = 0; round < o.repeats; ++round) {
        for (size_t c = 0; c < configs.size(); ++c) {
            const config & cfg = configs[c];
            if (progress) {
                std::fprintf(stderr, "\rbench: round %d/%d, %-24s", round + 1, o.repeats, cfg.name.c_str());
            }
            if (cfg.n_draft == 0) {
                runs[c].push_back(measure(specdec::generate_plain(target.get(), prompts, gp)));
                continue;
            }
            specdec::session_params sp = specdec_session_default_params();
            sp.strategy = cfg.strategy;
            sp.n_draft_max = cfg.n_draft;
            llama_context * draft = drafts.count(cfg.strategy) ? drafts[cfg.strategy].get() : nullptr;
            specdec::session session(target.get(), draft, sp);
            effective[c] = session.params().n_draft_max;
            runs[c].push_back(measure(specdec::generate(session, prompts, gp)));
            if (!o.upstream.empty()) {
                upstream_tps[c].push_back(run_upstream(o, cfg.strategy, cfg.n_draft, threads));
            }
        }
    }
    if (progress) {
        std::fputs("\r                                                   \r", stderr);
    }

    nlohmann::json out;
    out["model"] = o.model;
    out["draft_model"] = o.draft_model;
    out["n_predict"] = o.n_predict;
    out["repeats"] = o.repeats;
    out["threads"] = threads;
    std::vector<double> plain_tps;
    for (const auto & r : runs[0]) {
        plain_tps.push_back(r.tokens_per_second);
    }
    const double plain = median(plain_tps);
    std::printf("| configuration | tokens/s | speedup | limit | achieved/limit | acceptance | tokens/step | verify | draft | bookkeeping | identical |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t c = 0; c < configs.size(); ++c) {
        auto med = [&](double run_result::*field) {
            std::vector<double> v;
            for (const auto & r : runs[c]) {
                v.push_back(r.*field);
            }
            return median(v);
        };
        const bool identical = std::all_of(runs[c].begin(), runs[c].end(), [&](const run_result & r) { return r.tokens == runs[0][0].tokens; });
        const double tps = med(&run_result::tokens_per_second);
        // The limit: the tokens each step yields at the measured acceptance,
        // over the measured cost of verifying and drafting them, against the
        // cost of one plain token; no bookkeeping at all.
        const double plain_token_us = plain > 0 ? 1e6 / plain : 0.0;
        const double step_cost = med(&run_result::step_cost_us);
        const double limit = step_cost > 0 ? med(&run_result::tokens_per_step) * plain_token_us / step_cost : 0.0;
        const double speedup = plain > 0 ? tps / plain : 0.0;
        nlohmann::json row = {
            {"configuration", configs[c].name},
            {"strategy", configs[c].n_draft == 0 ? "none" : specdec_strategy_name(configs[c].strategy)},
            {"n_draft", configs[c].n_draft == 0 ? 0 : effective[c]},
            {"tokens_per_second", tps},
            {"speedup", speedup},
            {"limit", limit},
            {"achieved_of_limit", limit > 0 ? speedup / limit : 0.0},
            {"acceptance", med(&run_result::acceptance)},
            {"tokens_per_step", med(&run_result::tokens_per_step)},
            {"verify_share", med(&run_result::verify_share)},
            {"draft_share", med(&run_result::draft_share)},
            {"bookkeeping_share", med(&run_result::bookkeeping_share)},
            {"acceptance_by_position", runs[c].back().by_position},
            {"identical_to_plain", identical},
        };
        if (!upstream_tps[c].empty()) {
            const double up = median(upstream_tps[c]);
            row["upstream_tokens_per_second"] = up;
            row["ours_over_upstream"] = up > 0 ? tps / up : 0.0;
        }
        out["results"].push_back(row);
        if (row.contains("ours_over_upstream")) {
            std::fprintf(stderr, "bench: %s: upstream loop %.1f tokens/s, ours/upstream %.2f\n", configs[c].name.c_str(),
                         row["upstream_tokens_per_second"].get<double>(), row["ours_over_upstream"].get<double>());
        }
        std::printf("| %s | %.1f | %.2f | %.2f | %.0f%% | %.2f | %.2f | %.0f%% | %.0f%% | %.1f%% | %s |\n", configs[c].name.c_str(), tps,
                    speedup, limit, 100 * row["achieved_of_limit"].get<double>(), row["acceptance"].get<double>(),
                    row["tokens_per_step"].get<double>(),
                    100 * row["verify_share"].get<double>(), 100 * row["draft_share"].get<double>(),
                    100 * row["bookkeeping_share"].get<double>(), identical ? "yes" : "NO");
    }
    if (!o.json_path.empty()) {
        std::ofstream(o.json_path) << out.dump(2) << "\n";
    }
    const bool all_identical = std::all_of(out["results"].begin(), out["results"].end(),
                                           [](const nlohmann::json & r) { return r["identical_to_plain"].get<bool>(); });
    if (!all_identical) {
        std::fprintf(stderr, "specdec: error: a speculative run differed from plain decoding\n");
        return exit_failure;
    }
    return exit_ok;
}

} // namespace cli
