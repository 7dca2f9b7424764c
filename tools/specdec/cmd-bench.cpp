#include "cmd-bench.h"

#include "bench-oracle.h"
#include "bench-report.h"
#include "cli-common.h"
#include "fixtures.h"
#include "json-text.h"
#include "progress-line.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <span>

namespace cli {

void add_bench_command(CLI::App & app, bench_options & o) {
    CLI::App * cmd = app.add_subcommand("bench", "measure speculative decoding against plain decoding of the same target");
    CLI::Option * model = cmd->add_option("-m,--model", o.model, "target model (GGUF)")->check(CLI::ExistingFile);
    CLI::Option * fixture =
        cmd->add_option("--fixture", o.fixture,
                        "instead of -m: generate a controlled MTP target of --fixture-shape whose drafter is exact, "
                        "mixed (exact on alternate stretches of 16 tokens, wrong on the others) or random, or a soft "
                        "one (the target draws its next token among three with probabilities 0.5/0.25/0.25) whose "
                        "drafter draws with 0.7/0.05/0.25 (soft: sum min(p, q) = 0.8) or as the target (soft-matched), "
                        "and bench it")
            ->check(CLI::IsMember({"exact", "mixed", "random", "soft", "soft-matched"}));
    model->excludes(fixture);
    std::vector<std::string> shapes;
    for (const specdec::fixtures::shape_preset & p : specdec::fixtures::shape_presets()) {
        shapes.emplace_back(p.name);
    }
    cmd->add_option("--fixture-shape", o.fixture_shape, "dimensions of the generated fixture, copied from a real model")
        ->check(CLI::IsMember(shapes))
        ->capture_default_str();
    cmd->add_option("--fixture-type", o.fixture_type, "weights of the generated fixture")
        ->check([](const std::string & name) {
            return specdec::fixtures::find_weight_type(name) != nullptr
                       ? std::string()
                       : "unknown weight type '" + name + "'; expected one of " + specdec::fixtures::weight_type_names();
        })
        ->capture_default_str();
    cmd->add_option("--fixture-zipf", o.fixture_zipf,
                    "relabel the generated fixture's tokens so that its text's token ids follow a Zipf law of this "
                    "exponent (rank = id; for --draft-vocab; 0: off)")
        ->check(CLI::Range(0.0, 4.0));
    cmd->add_option("--fixture-blocks", o.fixture_blocks, "trunk blocks of the generated fixture (default: the shape's)")
        ->check(CLI::Range(1u, 64u));
    cmd->parse_complete_callback([&o] {
        if (o.model.empty() && o.fixture.empty()) {
            throw CLI::ValidationError("bench", "give a model (-m) or --fixture");
        }
        if (std::set<std::string>(o.kernels.begin(), o.kernels.end()).size() != o.kernels.size()) {
            throw CLI::ValidationError("--kernels", "give each of exact and fast at most once");
        }
    });
    cmd->add_option("--model-draft", o.draft_model, "draft model (GGUF) for eagle3, dflash, dspark, draft")->check(CLI::ExistingFile);
    cmd->add_option("--kernels", o.kernels,
                    "CPU kernels: exact (each row of a batch computed as alone: output identical to plain decoding) or "
                    "fast (llama.cpp's batch-dependent paths); repeatable: every configuration, prompt processing "
                    "and the verification-cost curve run under each in turn, and the report compares them")
        ->check(CLI::IsMember({"exact", "fast"}))
        ->capture_default_str();
    add_llama_options(cmd, o.llama);
    add_draft_vocab_options(cmd, o.draft_vocab);
    cmd->add_option("--spec", o.specs, "strategies to compare (repeatable); default: the one the files' metadata implies");
    cmd->add_option("--n-draft", o.n_drafts,
                    "draft lengths to sweep (repeatable): a number of tokens, or auto (adaptive, up to the longest "
                    "number given, else 8)")
        ->check(draft_length_validator())
        ->capture_default_str();
    cmd->add_option("--temp", o.temperatures, "temperatures to sweep (repeatable); 0: greedy")
        ->check(CLI::Range(0.0, 2.0))
        ->capture_default_str();
    cmd->add_option("--accept", o.accept_modes,
                    "accept modes to compare when sampling (repeatable): exact, rejection (see generate --accept)")
        ->check(CLI::IsMember({"exact", "rejection"}))
        ->capture_default_str();
    cmd->add_option("--n-seq", o.n_seqs, "sequences decoded together (repeatable: a sweep)")->check(CLI::Range(1, 64))->capture_default_str();
    cmd->add_option("-p,--prompt", o.prompt, "prompt text (every sequence gets it)");
    cmd->add_option("-f,--file", o.prompt_file, "read the prompt from a file (a long context)")->check(CLI::ExistingFile);
    cmd->add_option("-n,--n-predict", o.n_predict, "tokens generated per sequence and run")->check(CLI::Range(1, 1 << 16))->capture_default_str();
    cmd->add_option("-r,--repeats", o.repeats, "rounds; medians are reported")->check(CLI::Range(1, 1000))->capture_default_str();
    cmd->add_option("-c,--ctx-size", o.n_ctx, "context size per sequence")->check(CLI::Range(64u, 1u << 20))->capture_default_str();
    cmd->add_option("-t,--threads", o.n_threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
    cmd->add_option("--synthetic-acceptance", o.synthetic_acceptance,
                    "benchmarking an untrained drafter: keep each drafted token with this probability (given the ones "
                    "before it were kept) whatever the target says; the text is NOT valid, only speeds are")
        ->check(CLI::Range(0.0f, 1.0f));
    cmd->add_option("--json", o.json_path, "write the results as JSON to this file");
    cmd->add_option("--markdown", o.markdown_path, "write a Markdown report to this file");
    cmd->add_option("--chart", o.chart_path, "write a chart of speedup against draft length (.png or .svg; needs gnuplot)");
    cmd->add_option("--curve-rows", o.curve_rows,
                    "measure the verification-cost curve up to this many rows per sequence (default: the longest "
                    "draft + 1)")
        ->check(CLI::Range(2, SPECDEC_MAX_DRAFT + 1));
    cmd->add_flag("--speedups-only", o.speedups_only,
                  "measure the runs only: no verification-cost curve and no oracle (quicker; the table's columns stay)");
    cmd->add_flag("-q,--quiet", o.quiet, "no progress on stderr (which configuration and round runs, and the time left)");
    cmd->add_option("--upstream", o.upstream,
                    "llama.cpp's speculative-simple (built as bin/specdec-upstream-reference) to run as the reference loop")
        ->check(CLI::ExistingFile);
    add_device_options(cmd, o.devices);
}

namespace {

struct config {
    std::string      name;     // e.g. "plain", "mtp n=4", "mtp n=auto(8) x4"
    specdec_strategy strategy = SPECDEC_STRATEGY_MTP;
    int32_t          n_draft  = 0; // 0: plain decoding; adaptive: the most it may draft
    bool             adaptive = false;
    int32_t          n_seq    = 1;
    float            temperature = 0.0f;
    specdec_accept_mode accept = SPECDEC_ACCEPT_EXACT; // with temperature > 0
    bool             exact    = true; // exact kernels (else fast)
};

struct run_result {
    double tokens_per_second = 0; // all sequences together, after each one's first (see measure)
    double acceptance        = 0;
    double tokens_per_step   = 0; // per sequence and decoding step
    double verify_share      = 0; // of decode time (prefill excluded)
    double draft_share       = 0;
    double bookkeeping_share = 0;
    double step_cost_us      = 0; // target verification + drafting per step: what an ideal loop pays
    double draft_us_per_step = 0;
    double prefill_us        = 0; // the prompts' decode, every sequence's
    std::vector<double> by_position; // acceptance at each draft position given the ones before it
    std::vector<std::vector<llama_token>> tokens; // per sequence
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Decoding speed: each sequence's first token comes from its prompt's decode
// (prefill time, and a step that verified nothing), so the rates count the
// tokens after it, over the decoding time and the steps after it.
run_result measure(const specdec::generation_result & g) {
    specdec_sequence_stats st{};
    uint64_t n_steps = 0; // steps of the loop: every step verifies all sequences still running
    uint64_t decoded = 0; // see decoded_tokens
    run_result r;
    for (const auto & s : g.sequences) {
        st.n_generated += s.stats.n_generated;
        st.n_steps += s.stats.n_steps;
        st.n_drafted += s.stats.n_drafted;
        st.n_accepted += s.stats.n_accepted;
        for (size_t i = 0; i < SPECDEC_MAX_DRAFT; ++i) {
            st.n_proposed_at[i] += s.stats.n_proposed_at[i];
            st.n_accepted_at[i] += s.stats.n_accepted_at[i];
            st.n_reached_at[i] += s.stats.n_reached_at[i];
        }
        n_steps = std::max(n_steps, s.stats.n_steps);
        decoded += decoded_tokens(s.stats);
        r.tokens.push_back(s.tokens);
    }
    const auto & t = g.times;
    const double decode_us = static_cast<double>(std::max<int64_t>(1, t.t_total_us - t.t_prefill_us));
    const uint64_t verified = st.n_steps - (st.n_generated - decoded); // steps after each sequence's first
    n_steps = n_steps > 0 ? n_steps - 1 : 0;
    r.tokens_per_second = static_cast<double>(decoded) * 1e6 / decode_us;
    r.acceptance = st.n_drafted > 0 ? static_cast<double>(st.n_accepted) / static_cast<double>(st.n_drafted) : 0.0;
    r.tokens_per_step = verified > 0 ? static_cast<double>(decoded) / static_cast<double>(verified) : 0.0;
    r.verify_share = static_cast<double>(t.t_verify_us) / decode_us;
    r.draft_share = static_cast<double>(t.t_draft_us) / decode_us;
    r.bookkeeping_share = std::max(0.0, 1.0 - r.verify_share - r.draft_share);
    r.step_cost_us = n_steps > 0 ? static_cast<double>(t.t_verify_us + t.t_draft_us) / static_cast<double>(n_steps) : 0.0;
    r.draft_us_per_step = n_steps > 0 ? static_cast<double>(t.t_draft_us) / static_cast<double>(n_steps) : 0.0;
    r.prefill_us = static_cast<double>(t.t_prefill_us);
    for (size_t i = 0; i < SPECDEC_MAX_DRAFT && st.n_reached_at[i] > 0; ++i) {
        r.by_position.push_back(static_cast<double>(st.n_accepted_at[i]) / static_cast<double>(st.n_reached_at[i]));
    }
    return r;
}

// The target's cost of verifying k + 1 tokens per sequence, for n_seq
// sequences and every k <= k_max whose batch fits n_batch: the lowest of
// `repeats` (at least 5) measurements of one decode, each on the prompt
// alone (the rest of the machine only ever adds time): the measured rows are
// cut back where the memory allows it, else the prompt is decoded afresh (a
// recurrent state; a long prompt would cost more than the curve).
// Leaves the sequences holding the prompt (and, where the memory cannot cut back, the last measured batch).
// `on_pass(i, n)` is called before each of the n passes over every k.
std::vector<double> verify_cost_curve(llama_context * ctx, const std::vector<llama_token> & prompt, int32_t n_seq,
                                      int32_t k_max, int32_t repeats, const std::function<void(int32_t, int32_t)> & on_pass) {
    const auto n_prompt = static_cast<int32_t>(prompt.size());
    k_max = std::min<int32_t>(k_max, static_cast<int32_t>(llama_n_batch(ctx)) / n_seq - 1);
    struct owned_batch {
        llama_batch b;
        ~owned_batch() { llama_batch_free(b); }
    } owned{llama_batch_init((k_max + 1) * n_seq, 0, 1)};
    llama_batch & batch = owned.b;
    const std::vector<std::vector<llama_token>> prompts(static_cast<size_t>(n_seq), prompt);
    specdec::generate_params prefill = specdec_generate_default_params();
    prefill.n_predict = 0; // clears each sequence and decodes its prompt, in chunks
    std::vector<std::vector<double>> samples(static_cast<size_t>(k_max) + 1);
    const int32_t passes = std::max(repeats, 5);
    // Drops what a measurement decoded after the prompt; false where the memory cannot.
    const auto cut_back = [&] {
        bool all = true;
        for (llama_seq_id s = 0; s < n_seq; ++s) {
            all = llama_memory_seq_rm(llama_get_memory(ctx), s, n_prompt, -1) && all;
        }
        return all;
    };
    bool on_prompt = false;
    for (int32_t round = 0; round < passes; ++round) {
        on_pass(round, passes);
        for (int32_t k = 0; k <= k_max; ++k) {
            if (!on_prompt) {
                specdec::generate_plain(ctx, prompts, prefill);
            }
            // k + 1 tokens after the prompt, varied so that expert routing costs what it would.
            batch.n_tokens = 0;
            for (llama_seq_id s = 0; s < n_seq; ++s) {
                for (int32_t i = 0; i <= k; ++i) {
                    const int32_t j = batch.n_tokens++;
                    batch.token[j] = prompt[static_cast<size_t>((n_prompt + i + s) % n_prompt)];
                    batch.pos[j] = n_prompt + i;
                    batch.n_seq_id[j] = 1;
                    batch.seq_id[j][0] = s;
                    batch.logits[j] = true;
                }
            }
            const auto t0 = std::chrono::steady_clock::now();
            const int32_t rc = llama_decode(ctx, batch);
            const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            if (rc != 0) {
                throw specdec::error(SPECDEC_STATUS_DECODE_FAILED, "target decode failed while measuring the verification cost");
            }
            samples[static_cast<size_t>(k)].push_back(us);
            on_prompt = cut_back();
        }
    }
    std::vector<double> curve;
    for (const auto & v : samples) {
        curve.push_back(*std::min_element(v.begin(), v.end()));
    }
    return curve;
}

// Runs upstream's speculative-simple with the same model, strategy, draft
// length, prompt, budget and threads; returns its decode speed in tokens/s.
double run_upstream(const bench_options & o, specdec_strategy strategy, int32_t n_draft, int32_t threads) {
    const std::string name = specdec_strategy_name(strategy);
    const std::string type = strategy == SPECDEC_STRATEGY_DRAFT ? "draft-simple"
                           : name.rfind("ngram", 0) == 0        ? name
                                                                : "draft-" + name;
    // An absolute path, so that a bare file name is not looked up in PATH.
    std::vector<std::string> argv = {std::filesystem::absolute(o.upstream).string(), "-m", o.model, "--spec-type", type, "--spec-draft-n-max",
                                     std::to_string(n_draft), "-p", o.prompt, "-n", std::to_string(o.n_predict),
                                     "-t", std::to_string(threads), "-c", std::to_string(o.n_ctx), "--temp", "0",
                                     "--top-k", "1"};
    if (strategy != SPECDEC_STRATEGY_MTP && !o.draft_model.empty() && specdec_strategy_needs_draft_context(strategy)) {
        argv.insert(argv.end(), {"--spec-draft-model", o.draft_model});
    }
    const temp_dir dir("specdec-upstream-");
    const std::filesystem::path log = dir.path() / "upstream.log";
    const int status = run_program(argv, log, "build it with the project (bin/specdec-upstream-reference)");
    std::ifstream f(log);
    const std::string output((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t at = output.find("decoded ");
    const size_t speed = output.find("speed:", at == std::string::npos ? 0 : at);
    if (status != 0 || at == std::string::npos || speed == std::string::npos) {
        const std::string why = status != 0 ? "the upstream reference failed (wait status " + std::to_string(status) + ")"
                                            : std::string("the upstream reference printed no decode speed");
        throw specdec::error(SPECDEC_STATUS_NATIVE_FAILURE, why + "; its output ends with: " + file_tail(log, 400));
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

// The draft lengths of the sweep: numbers as given, "auto" as adaptive with
// the longest number given (8 when there is none) as its cap.
std::vector<std::pair<int32_t, bool>> draft_lengths_of(const bench_options & o) {
    int32_t longest = 0;
    for (const std::string & v : o.n_drafts) {
        longest = v == "auto" ? longest : std::max(longest, std::stoi(v));
    }
    std::vector<std::pair<int32_t, bool>> out;
    for (const std::string & v : o.n_drafts) {
        out.emplace_back(v == "auto" ? (longest > 0 ? longest : auto_draft_max) : std::stoi(v), v == "auto");
    }
    return out;
}

// Per temperature and number of sequences: plain decoding, then every
// strategy and draft length, in each accept mode when sampling; each under
// every kernels given, one after the other ("... fast" when compared).
std::vector<config> configs_of(const bench_options & o, const std::vector<specdec_strategy> & strategies) {
    std::vector<config> out;
    const auto add = [&](const config & c) {
        for (const std::string & k : o.kernels) {
            config with = c;
            with.exact = k == "exact";
            with.name += with.exact || o.kernels.size() == 1 ? "" : " fast";
            out.push_back(with);
        }
    };
    for (float t : o.temperatures) {
        const bool sampled = t >= SPECDEC_MIN_SAMPLING_TEMPERATURE;
        char temp[32];
        std::snprintf(temp, sizeof temp, " T=%g", static_cast<double>(t));
        const std::string at = sampled ? temp : "";
        std::vector<specdec_accept_mode> modes = {SPECDEC_ACCEPT_EXACT};
        if (sampled && o.synthetic_acceptance < 0.0f) { // synthetic acceptance decides drafts alone
            modes.clear();
            for (const std::string & m : o.accept_modes) {
                modes.push_back(accept_mode_of(m));
            }
        }
        for (int32_t n_seq : o.n_seqs) {
            const std::string suffix = n_seq > 1 ? " x" + std::to_string(n_seq) : "";
            add({"plain" + at + suffix, SPECDEC_STRATEGY_MTP, 0, false, n_seq, t});
            for (specdec_strategy s : strategies) {
                for (const auto & [n, adaptive] : draft_lengths_of(o)) {
                    const std::string length = adaptive ? "auto(" + std::to_string(n) + ")" : std::to_string(n);
                    for (specdec_accept_mode m : modes) {
                        const std::string mode = sampled ? std::string(" ") + accept_mode_name(m) : "";
                        add({std::string(specdec_strategy_name(s)) + " n=" + length + at + mode + suffix, s, n, adaptive, n_seq,
                             t, m});
                    }
                }
            }
        }
    }
    return out;
}

// A generated bench fixture in a temporary directory of its own, removed
// with it.
class generated_fixture {
public:
    explicit generated_fixture(const bench_options & o) : dir_("specdec-bench-"), path_((dir_.path() / "fixture.gguf").string()) {
        namespace fx = specdec::fixtures;
        const fx::shape_preset & shape = *fx::find_shape(o.fixture_shape);
        fx::fixture_options opt = shape.options;
        if (o.fixture_blocks > 0) {
            opt.n_layer = o.fixture_blocks;
        }
        opt.drafter = o.fixture == "exact" || o.fixture == "soft-matched" ? fx::drafter_kind::exact
                    : o.fixture == "mixed"                              ? fx::drafter_kind::mixed
                    : o.fixture == "soft"                               ? fx::drafter_kind::soft
                                                                        : fx::drafter_kind::random;
        if (o.fixture.rfind("soft", 0) == 0) {
            opt.soft_target = {{0.5f, 0.25f, 0.25f}};
        }
        if (o.fixture == "soft") {
            opt.soft_drafter = {{0.7f, 0.05f, 0.25f}};
        }
        const fx::weight_type type = fx::find_weight_type(o.fixture_type)->type;
        const bool qwen35 = std::string(shape.mtp_kind) == "qwen35-mtp";
        progress_line progress("bench", o.quiet);
        const std::string what = std::string("the fixture (") + shape.name + ", " + std::to_string(opt.n_layer) + " blocks, " +
                                 o.fixture + " drafter, " + o.fixture_type + "): ";
        try {
            fx::write_with_type([&](const std::string & p) { qwen35 ? fx::write_qwen35_mtp(p, opt) : fx::write_glm4moe_mtp(p, opt); },
                                path_, type,
                                [&](const char * stage, uint32_t done, uint32_t total) { progress.stage(what + stage, done, total, "tensors"); });
            if (o.fixture_zipf > 0.0) {
                progress.stage(what + "spreading the cycle over a Zipf law", 0, 0, "tensors");
                fx::spread_cycle_zipf(path_, o.fixture_zipf);
            }
        } catch (const std::exception & e) {
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, std::string("cannot write the bench fixture: ") + e.what());
        }
    }

    const std::string & path() const { return path_; }

private:
    temp_dir    dir_;
    std::string path_;
};

double median_of(const std::vector<run_result> & runs, double run_result::*field) {
    std::vector<double> v;
    for (const auto & r : runs) {
        v.push_back(r.*field);
    }
    return median(v);
}

// Linear between the two points (k, y) around k, of at least two; past the
// last point the last segment goes on.
double interpolate(const std::map<int32_t, double> & points, int32_t k) {
    auto hi = points.lower_bound(k);
    if (hi != points.end() && hi->first == k) {
        return hi->second;
    }
    if (hi == points.end()) {
        hi = std::prev(points.end());
    }
    if (hi == points.begin()) {
        ++hi;
    }
    const auto lo = std::prev(hi);
    const double slope = (hi->second - lo->second) / static_cast<double>(hi->first - lo->first);
    return lo->second + slope * static_cast<double>(k - lo->first);
}

// The oracle of every strategy at every number of sequences (bench-oracle.h):
// the agreement along plain decoding's text (every sequence has the same
// prompt, so one sequence measures it for all), and the cost of a step
// drafting k tokens per sequence from this run: plain decoding's measured
// step scaled by the measured verification cost of k + 1 tokens, plus the
// drafting time per step of the fixed-length runs (interpolated between the
// lengths run), scaled to what a step of each length run cost in its run.
// Adds out["oracle"], out["agreement"] and each adaptive row's "of_oracle";
// says on `progress` whose agreement it measures, and how far along.
void add_oracles(nlohmann::json & out, const bench_options & o, const std::vector<specdec_strategy> & strategies,
                 const std::vector<config> & configs, const std::vector<std::vector<run_result>> & runs,
                 const std::vector<int32_t> & effective, const std::map<int32_t, size_t> & plain_of, llama_context * target,
                 const std::map<specdec_strategy, llama_context_ptr> & drafts, const std::vector<llama_token> & prompt,
                 int32_t n_draft_top, const draft_vocab_choice & vocab, progress_line & progress) {
    const std::vector<llama_token> & text = runs[plain_of.begin()->second].front().tokens.front();
    const std::string & reference = o.kernels.front(); // the kernels whose runs the oracle is built from
    for (specdec_strategy strategy : strategies) {
        const std::string name = specdec_strategy_name(strategy);
        specdec::session_params sp = specdec_session_default_params();
        vocab.apply(sp);
        sp.strategy = strategy;
        sp.n_draft_max = n_draft_top;
        const auto draft = drafts.find(strategy);
        specdec::session session(target, draft != drafts.end() ? draft->second.get() : nullptr, sp);
        const int32_t n_max = session.params().n_draft_max;
        const std::string what = "the oracle: where " + name + " agrees with plain decoding's text";
        progress.step(what);
        const std::vector<int32_t> agreement = measure_agreement(session, prompt, text, n_max, [&](size_t i, size_t n) {
            progress.update(what + ": " + std::to_string(i) + "/" + std::to_string(n) + " tokens");
        });
        out["agreement"][name] = agreement;
        for (int32_t n_seq : o.n_seqs) {
            const size_t p = plain_of.at(n_seq);
            const double plain_step = median_of(runs[p], &run_result::step_cost_us);
            const double plain_tps = median_of(runs[p], &run_result::tokens_per_second);
            std::vector<double> relative;
            for (const auto & v : out["verify_cost"]) {
                if (v["n_seq"].get<int32_t>() == n_seq && v["kernels"] == reference) {
                    relative = v["relative"].get<std::vector<double>>();
                }
            }
            std::map<int32_t, double> drafting = {{0, 0.0}};
            std::map<int32_t, double> paid;   // what a step of each fixed length run cost
            for (size_t c = 0; c < configs.size(); ++c) {
                if (configs[c].strategy == strategy && configs[c].n_draft > 0 && !configs[c].adaptive && configs[c].n_seq == n_seq &&
                    configs[c].temperature < SPECDEC_MIN_SAMPLING_TEMPERATURE && configs[c].exact == (reference == "exact")) {
                    drafting[effective[c]] = median_of(runs[c], &run_result::draft_us_per_step);
                    paid[effective[c]] = median_of(runs[c], &run_result::step_cost_us);
                }
            }
            if (relative.empty() || drafting.size() < 2 || plain_step <= 0 || plain_tps <= 0 || agreement.size() < 2) {
                continue; // no fixed length was run (nothing to build the curve from), or no token after the first
            }
            // The curve's shape, then scaled to what the run's steps paid at
            // the lengths it ran (the direct measurements are each the
            // lowest of several decodes of a short cache: a step in a run,
            // after its drafting, pays more), interpolated between them.
            std::vector<double> step_cost;
            for (int32_t k = 0; k <= n_max && static_cast<size_t>(k) < relative.size(); ++k) {
                step_cost.push_back(plain_step * relative[static_cast<size_t>(k)] + std::max(0.0, interpolate(drafting, k)));
            }
            std::map<int32_t, double> scale = {{0, 1.0}};
            for (const auto & [k, cost] : paid) {
                if (static_cast<size_t>(k) < step_cost.size() && cost > 0) {
                    scale[k] = cost / step_cost[static_cast<size_t>(k)];
                }
            }
            for (size_t k = 1; k < step_cost.size(); ++k) {
                const auto at = static_cast<int32_t>(k);
                step_cost[k] *= at >= scale.rbegin()->first ? scale.rbegin()->second : interpolate(scale, at);
            }
            // The first token is the prompt's decode's, in every policy.
            const std::span<const int32_t> decoded(agreement.data() + 1, agreement.size() - 1);
            const oracle_result best = oracle_plan(decoded, step_cost);
            const double tps = static_cast<double>(decoded.size()) * n_seq * 1e6 / best.cost;
            const double speedup = tps / plain_tps;
            out["oracle"].push_back({{"strategy", name},
                                     {"n_seq", n_seq},
                                     {"tokens_per_second", tps},
                                     {"speedup", speedup},
                                     {"tokens_per_step", static_cast<double>(decoded.size()) / static_cast<double>(best.steps)},
                                     {"step_cost_us", step_cost}});
            for (auto & row : out["results"]) {
                if (row["adaptive"].get<bool>() && row["strategy"] == name && row["n_seq"].get<int32_t>() == n_seq &&
                    row["temperature"].get<float>() < SPECDEC_MIN_SAMPLING_TEMPERATURE && row["kernels"] == reference) {
                    row["of_oracle"] = row["speedup"].get<double>() / speedup;
                }
            }
        }
    }
}

int bench_model(const bench_options & o) {
    const std::vector<specdec_strategy> strategies = strategies_of(o);
    const bool synthetic = o.synthetic_acceptance >= 0.0f;
    int32_t n_draft_top = 1;
    for (const auto & [n, adaptive] : draft_lengths_of(o)) {
        n_draft_top = std::max(n_draft_top, n);
    }
    const int32_t n_seq_top = *std::max_element(o.n_seqs.begin(), o.n_seqs.end());
    const bool any_mtp = std::find(strategies.begin(), strategies.end(), SPECDEC_STRATEGY_MTP) != strategies.end();

    // Each kernels given is checked (and announced) before anything loads;
    // each run then sets its own, and the first given is the oracle's.
    const bool reference_exact = o.kernels.front() == "exact";
    for (const std::string & k : o.kernels) {
        use_kernels(k);
        require_exact(o.model);
    }
    set_kernels(reference_exact);
    const draft_vocab_choice vocab = resolve_draft_vocab(o.draft_vocab, o.model);
    add_rpc_servers(o.devices);
    progress_line progress("bench", o.quiet);
    progress.step("loading " + o.model);
    llama_model_ptr target_model = load_model(o.model, any_mtp, o.devices.target, o.llama, !o.quiet);
    llama_model_ptr draft_model;
    if (!o.draft_model.empty()) {
        progress.step("loading " + o.draft_model);
        draft_model = load_model(o.draft_model, false, o.devices.draft, o.llama, !o.quiet);
    }
    llama_context_params cp = context_params(o.n_ctx, static_cast<uint32_t>(n_seq_top), o.n_threads, o.llama);
    const int32_t threads = cp.n_threads;
    if (llama_model_is_recurrent(target_model.get()) || llama_model_is_hybrid(target_model.get())) {
        cp.n_rs_seq = static_cast<uint32_t>(n_draft_top);
    }
    llama_context_ptr target(llama_init_from_model(target_model.get(), cp));
    if (!target) {
        throw specdec::error(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp could not create the target context (run with -v)");
    }
    // One draft context per strategy, sized for the longest draft and the most sequences.
    std::map<specdec_strategy, llama_context_ptr> drafts;
    for (specdec_strategy s : strategies) {
        if (specdec_strategy_needs_draft_context(s)) {
            specdec::session_params sp = specdec_session_default_params();
            vocab.apply(sp);
            sp.strategy = s;
            sp.n_draft_max = n_draft_top;
            sp.n_seq = static_cast<uint32_t>(n_seq_top);
            drafts[s] = specdec::make_draft_context(target.get(), s == SPECDEC_STRATEGY_MTP ? nullptr : draft_model.get(), sp, cp);
        }
    }
    const std::vector<llama_token> prompt = tokenize(target_model.get(), o.prompt_file.empty() ? o.prompt : read_file(o.prompt_file));
    const std::vector<config> configs = configs_of(o, strategies);

    specdec::generate_params gp = specdec_generate_default_params();
    gp.n_predict = o.n_predict;
    gp.ignore_eog = true; // every run generates the same number of tokens
    auto prompts_for = [&](int32_t n_seq) { return std::vector<std::vector<llama_token>>(static_cast<size_t>(n_seq), prompt); };

    // Unmeasured runs warm caches, threads and each drafter's first-use set-up
    // (plain, then every strategy at its longest draft); then rounds
    // interleave the configurations, so slow drift of the machine affects all
    // of them alike.
    int32_t mtp_draft_vocab = -1; // the MTP drafter's restricted vocabulary in effect (0: whole); -1: no MTP
    // Plain decoding under each kernels, the reference's last: the strategies warm up under it.
    for (auto k = o.kernels.rbegin(); k != o.kernels.rend(); ++k) {
        progress.step("warming up: plain decoding, " + *k + " kernels");
        set_kernels(*k == "exact");
        specdec::generate_plain(target.get(), prompts_for(n_seq_top), gp);
    }
    for (specdec_strategy s : strategies) {
        progress.step(std::string("warming up: ") + specdec_strategy_name(s));
        specdec::session_params sp = specdec_session_default_params();
        vocab.apply(sp);
        sp.strategy = s;
        sp.n_draft_max = n_draft_top;
        sp.n_seq = static_cast<uint32_t>(n_seq_top);
        specdec::session session(target.get(), drafts.count(s) ? drafts[s].get() : nullptr, sp);
        if (s == SPECDEC_STRATEGY_MTP) {
            mtp_draft_vocab = session.params().draft_vocab;
        }
        specdec::generate(session, prompts_for(n_seq_top), gp);
    }
    std::vector<std::vector<run_result>> runs(configs.size());
    std::vector<std::vector<double>> upstream_tps(configs.size());
    std::vector<int32_t> effective(configs.size(), 0);
    // Each configuration's seconds per run in the rounds so far: the time
    // left is estimated once a whole round has been timed.
    std::vector<double> seconds(configs.size(), 0.0);
    std::vector<int32_t> timed_runs(configs.size(), 0);
    const size_t n_runs = configs.size() * static_cast<size_t>(o.repeats);
    for (int32_t round = 0; round < o.repeats; ++round) {
        for (size_t c = 0; c < configs.size(); ++c) {
            const config & cfg = configs[c];
            const size_t run = static_cast<size_t>(round) * configs.size() + c;
            std::string line = "round " + std::to_string(round + 1) + "/" + std::to_string(o.repeats) + ": " + cfg.name +
                               " (run " + std::to_string(run + 1) + "/" + std::to_string(n_runs);
            if (round > 0) {
                double left = 0;
                for (size_t r = run; r < n_runs; ++r) {
                    left += seconds[r % configs.size()] / timed_runs[r % configs.size()];
                }
                line += ", about " + format_duration(left) + " left in the rounds";
            }
            line += ")";
            progress.step(line);
            // Within a run, the tokens so far (a long run still shows that it moves).
            const int64_t n_tokens = static_cast<int64_t>(o.n_predict) * cfg.n_seq;
            int64_t n_done = 0;
            const specdec::token_callback on_token = [&](llama_seq_id, llama_token, std::string_view) {
                progress.update(line + ": " + std::to_string(++n_done) + "/" + std::to_string(n_tokens) + " tokens");
                return true;
            };
            const auto t0 = std::chrono::steady_clock::now();
            const auto timed = [&] {
                seconds[c] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                ++timed_runs[c];
            };
            const auto prompts = prompts_for(cfg.n_seq);
            set_kernels(cfg.exact);
            specdec::generate_params run_params = gp;
            run_params.temperature = cfg.temperature;
            run_params.accept = cfg.accept;
            if (cfg.n_draft == 0) {
                runs[c].push_back(measure(specdec::generate_plain(target.get(), prompts, run_params, on_token)));
                timed();
                continue;
            }
            specdec::session_params sp = specdec_session_default_params();
            vocab.apply(sp);
            sp.strategy = cfg.strategy;
            sp.n_draft_max = cfg.n_draft;
            sp.n_seq = static_cast<uint32_t>(cfg.n_seq);
            llama_context * draft = drafts.count(cfg.strategy) ? drafts[cfg.strategy].get() : nullptr;
            specdec::session session(target.get(), draft, sp);
            effective[c] = session.params().n_draft_max;
            run_params.n_draft = cfg.adaptive ? SPECDEC_N_DRAFT_AUTO : -1;
            run_params.synthetic_acceptance = o.synthetic_acceptance;
            runs[c].push_back(measure(specdec::generate(session, prompts, run_params, on_token)));
            // Upstream's loop: one sequence, a fixed length, the target's own acceptance.
            if (!o.upstream.empty() && !cfg.adaptive && cfg.n_seq == 1 && !synthetic && cfg.temperature == 0.0f) {
                upstream_tps[c].push_back(run_upstream(o, cfg.strategy, cfg.n_draft, threads));
            }
            timed();
        }
    }

    nlohmann::json out;
    if (o.fixture.empty()) {
        out["model"] = o.model;
    } else {
        const specdec::fixtures::shape_preset & shape = *specdec::fixtures::find_shape(o.fixture_shape);
        const uint32_t blocks = o.fixture_blocks > 0 ? o.fixture_blocks : shape.options.n_layer;
        const std::string arch = std::string(shape.mtp_kind) == "qwen35-mtp" ? "qwen35" : "glm4moe";
        out["model"] = "generated " + arch + " MTP fixture shaped like " + shape.real_model + " (" + o.fixture_shape + ", " +
                       std::to_string(blocks) + " blocks, " + o.fixture + " drafter, " + o.fixture_type + ")";
        out["fixture"] = {{"architecture", arch}, {"shape", o.fixture_shape}, {"drafter", o.fixture},
                          {"type", o.fixture_type}, {"blocks", blocks}, {"zipf", o.fixture_zipf}};
    }
    out["draft_model"] = o.draft_model;
    out["n_predict"] = o.n_predict;
    out["repeats"] = o.repeats;
    out["threads"] = threads;
    out["exact_kernels"] = reference_exact;
    out["kernels"] = o.kernels;
    out["draft_vocab"] = mtp_draft_vocab >= 0 ? nlohmann::json(mtp_draft_vocab) : nlohmann::json(nullptr);
    out["synthetic_acceptance"] = synthetic ? nlohmann::json(o.synthetic_acceptance) : nlohmann::json(nullptr);
    // The target's cost of verifying k + 1 tokens, relative to one token.
    const int32_t k_curve = std::max(n_draft_top, o.curve_rows - 1);
    for (const std::string & kernels : o.speedups_only ? std::vector<std::string>{} : o.kernels) {
        set_kernels(kernels == "exact");
        for (int32_t n_seq : o.n_seqs) {
            const auto t0 = std::chrono::steady_clock::now();
            const auto on_pass = [&](int32_t pass, int32_t passes) {
                std::string line = (o.kernels.size() > 1 ? kernels + " kernels: " : std::string()) + "verification cost of 1 to " + std::to_string(k_curve + 1) + " tokens, " +
                                   std::to_string(n_seq) + (n_seq > 1 ? " sequences" : " sequence") + ": pass " +
                                   std::to_string(pass + 1) + "/" + std::to_string(passes);
                if (pass > 0) {
                    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    line += " (about " + format_duration(spent / pass * (passes - pass)) + " left)";
                }
                progress.step(line);
            };
            const std::vector<double> curve = verify_cost_curve(target.get(), prompt, n_seq, k_curve, o.repeats, on_pass);
            std::vector<double> relative;
            for (double us : curve) {
                relative.push_back(curve[0] > 0 ? us / curve[0] : 0.0);
            }
            out["verify_cost"].push_back({{"n_seq", n_seq}, {"kernels", kernels}, {"microseconds", curve}, {"relative", relative}});
        }
    }
    set_kernels(reference_exact);
    std::map<std::tuple<int32_t, float, bool>, size_t> plain_of; // (n_seq, temperature, exact) -> its plain configuration
    std::map<int32_t, size_t> greedy_plain_of;                    // n_seq -> its greedy plain configuration, reference kernels
    for (size_t c = 0; c < configs.size(); ++c) {
        if (configs[c].n_draft == 0) {
            plain_of[{configs[c].n_seq, configs[c].temperature, configs[c].exact}] = c;
            if (configs[c].temperature < SPECDEC_MIN_SAMPLING_TEMPERATURE && configs[c].exact == reference_exact) {
                greedy_plain_of[configs[c].n_seq] = c;
            }
        }
    }
    for (size_t c = 0; c < configs.size(); ++c) {
        const config & cfg = configs[c];
        auto med = [&](size_t i, double run_result::*field) {
            std::vector<double> v;
            for (const auto & r : runs[i]) {
                v.push_back(r.*field);
            }
            return median(v);
        };
        const size_t p = plain_of[{cfg.n_seq, cfg.temperature, cfg.exact}];
        const double plain = med(p, &run_result::tokens_per_second);
        const double tps = med(c, &run_result::tokens_per_second);
        // The limit: the tokens each step yields at the measured acceptance,
        // over the measured cost of verifying and drafting them, against
        // plain decoding's measured tokens per second; no bookkeeping at all.
        const double step_cost = med(c, &run_result::step_cost_us);
        const double limit = step_cost > 0 && plain > 0
                                 ? med(c, &run_result::tokens_per_step) * cfg.n_seq * 1e6 / step_cost / plain
                                 : 0.0;
        const double speedup = plain > 0 ? tps / plain : 0.0;
        // Each round's own ratio (rounds interleave the configurations):
        // their spread is how far one run's ratio can be trusted.
        std::vector<double> by_round;
        for (size_t r = 0; r < runs[c].size(); ++r) {
            const double base = runs[p][r].tokens_per_second;
            by_round.push_back(base > 0 ? runs[c][r].tokens_per_second / base : 0.0);
        }
        const bool identical = std::all_of(runs[c].begin(), runs[c].end(), [&](const run_result & r) { return r.tokens == runs[p][0].tokens; });
        // Rejection sampling keeps the target's distribution, not plain
        // decoding's draws; fast kernels make no promise.
        const bool comparable = (cfg.exact || cfg.n_draft == 0) && !(synthetic && cfg.n_draft > 0) &&
                                !(cfg.accept == SPECDEC_ACCEPT_REJECTION && cfg.temperature >= SPECDEC_MIN_SAMPLING_TEMPERATURE);
        nlohmann::json row = {
            {"configuration", cfg.name},
            {"strategy", cfg.n_draft == 0 ? "none" : specdec_strategy_name(cfg.strategy)},
            {"n_draft", cfg.n_draft == 0 ? 0 : effective[c]},
            {"adaptive", cfg.adaptive},
            {"n_seq", cfg.n_seq},
            {"temperature", cfg.temperature},
            {"accept", accept_mode_name(cfg.accept)},
            {"kernels", cfg.exact ? "exact" : "fast"},
            {"prefill_ms", med(c, &run_result::prefill_us) / 1000.0},
            {"tokens_per_second", tps},
            {"speedup", speedup},
            {"speedup_by_round", by_round},
            {"limit", limit},
            {"achieved_of_limit", limit > 0 ? speedup / limit : 0.0},
            {"acceptance", med(c, &run_result::acceptance)},
            {"tokens_per_step", med(c, &run_result::tokens_per_step)},
            {"verify_share", med(c, &run_result::verify_share)},
            {"draft_share", med(c, &run_result::draft_share)},
            {"bookkeeping_share", med(c, &run_result::bookkeeping_share)},
            {"acceptance_by_position", runs[c].back().by_position},
            {"identical_to_plain", comparable ? nlohmann::json(identical) : nlohmann::json(nullptr)},
        };
        // Exact against fast kernels: rounds run a configuration's two kernels one after the other,
        // so each round's ratio pairs runs made at nearly the same time, and their median is what a
        // host whose speed drifts between rounds still measures.
        const auto fast = std::find_if(configs.begin(), configs.end(), [&](const config & f) { return f.name == cfg.name + " fast"; });
        if (cfg.exact && fast != configs.end()) {
            const auto & other = runs[static_cast<size_t>(fast - configs.begin())];
            std::vector<double> decode;
            std::vector<double> prefill;
            for (size_t r = 0; r < std::min(runs[c].size(), other.size()); ++r) {
                decode.push_back(other[r].tokens_per_second > 0 ? runs[c][r].tokens_per_second / other[r].tokens_per_second : 0.0);
                prefill.push_back(runs[c][r].prefill_us > 0 ? other[r].prefill_us / runs[c][r].prefill_us : 0.0);
            }
            row["exact_over_fast"] = {{"decoding", median(decode)}, {"prompt_processing", median(prefill)},
                                      {"decoding_by_round", decode}, {"prompt_processing_by_round", prefill}};
        }
        if (!upstream_tps[c].empty()) {
            const double up = median(upstream_tps[c]);
            row["upstream_tokens_per_second"] = up;
            row["ours_over_upstream"] = up > 0 ? tps / up : 0.0;
        }
        out["results"].push_back(row);
    }

    if (!synthetic && !o.speedups_only && !greedy_plain_of.empty()) {
        add_oracles(out, o, strategies, configs, runs, effective, greedy_plain_of, target.get(), drafts, prompt, n_draft_top, vocab,
                    progress);
    }
    progress.clear();

    if (synthetic) {
        std::fprintf(stderr, "bench: synthetic acceptance %.2f: drafts were kept at random, the text is not valid (speeds only)\n",
                     static_cast<double>(o.synthetic_acceptance));
    }
    std::fputs(bench_markdown_table(out).c_str(), stdout);
    if (out.contains("verify_cost")) {
        std::printf("\nverification cost of k + 1 tokens against 1 token:\n");
    }
    for (const auto & v : out.value("verify_cost", nlohmann::json::array())) {
        std::printf("  %s kernels, n_seq=%d:", v["kernels"].get<std::string>().c_str(), v["n_seq"].get<int>());
        const auto & rel = v["relative"];
        for (size_t k = 0; k < rel.size(); ++k) {
            std::printf(" k=%zu %.2f", k, rel[k].get<double>());
        }
        std::printf("\n");
    }
    if (!o.json_path.empty()) {
        std::ofstream f(o.json_path);
        f << json_text(out) << "\n";
        if (!f) {
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot write '" + o.json_path + "'");
        }
    }
    if (!o.markdown_path.empty()) {
        write_bench_markdown(out, o.markdown_path);
    }
    if (!o.chart_path.empty()) {
        write_bench_chart(out, o.chart_path);
    }
    const bool all_identical = std::all_of(out["results"].begin(), out["results"].end(), [](const nlohmann::json & r) {
        return r["identical_to_plain"].is_null() || r["identical_to_plain"].get<bool>();
    });
    if (!all_identical) {
        std::fprintf(stderr, "specdec: error: a speculative run differed from plain decoding\n");
        return exit_failure;
    }
    return exit_ok;
}

} // namespace

int run_bench(const bench_options & o) {
    if (o.fixture.empty()) {
        return bench_model(o);
    }
    const generated_fixture fixture(o);
    bench_options with_model = o;
    with_model.model = fixture.path();
    return bench_model(with_model);
}

} // namespace cli
