// Checks a `specdec bench --json` document: every field present, every number
// finite and in range, and the derived numbers consistent with the measured
// ones (speedup against the plain row of the same batch size and within its
// rounds' speedups, achieved/limit, shares adding up, ours/upstream). No
// timing is judged.
//
//   check-bench-json FILE [--exact] [--synthetic]
//     --exact      the drafter is exact: every real-acceptance row accepts everything
//     --synthetic  the run used synthetic acceptance (identical_to_plain is null)
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <vector>
#include <string>

namespace {

int problems = 0;

void expect(bool ok, const std::string & what) {
    if (!ok) {
        std::fprintf(stderr, "check-bench-json: %s\n", what.c_str());
        ++problems;
    }
}

bool near(double a, double b) {
    return std::fabs(a - b) <= 1e-6 * std::max(1.0, std::fabs(b));
}

// The number under `key`, after checking it is there, finite and >= 0.
double number(const nlohmann::json & row, const std::string & key, const std::string & where) {
    if (!row.contains(key) || !row[key].is_number()) {
        expect(false, where + ": no number " + key);
        return 0;
    }
    const double v = row[key].get<double>();
    expect(std::isfinite(v) && v >= 0, where + ": " + key + " = " + std::to_string(v));
    return v;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: check-bench-json FILE [--exact] [--synthetic]\n");
        return 2;
    }
    bool exact = false;
    bool synthetic = false;
    for (int i = 2; i < argc; ++i) {
        exact = exact || std::string(argv[i]) == "--exact";
        synthetic = synthetic || std::string(argv[i]) == "--synthetic";
    }
    nlohmann::json doc;
    try {
        std::ifstream(argv[1]) >> doc;
    } catch (const std::exception & e) {
        std::fprintf(stderr, "check-bench-json: %s is not JSON: %s\n", argv[1], e.what());
        return 1;
    }

    for (const char * key : {"model", "draft_model"}) {
        expect(doc.contains(key) && doc[key].is_string(), std::string("no string ") + key);
    }
    for (const char * key : {"n_predict", "repeats", "threads"}) {
        expect(number(doc, key, "document") >= 1, std::string(key) + " >= 1");
    }
    expect(doc.contains("synthetic_acceptance") && doc["synthetic_acceptance"].is_null() != synthetic,
           "synthetic_acceptance must be set exactly for a synthetic run");

    // The verification cost curve: k = 0.. with relative[0] = 1, one per
    // kernels and n_seq.
    std::set<std::pair<std::string, int>> curves;
    for (const auto & c : doc.value("verify_cost", nlohmann::json::array())) {
        const auto & us = c.at("microseconds");
        const auto & rel = c.at("relative");
        expect(us.size() >= 2 && us.size() == rel.size(), "verify_cost needs k = 0 and at least k = 1");
        for (size_t k = 0; k < us.size(); ++k) {
            expect(std::isfinite(us[k].get<double>()) && us[k].get<double>() > 0, "verify_cost microseconds > 0");
            expect(near(rel[k].get<double>(), us[k].get<double>() / us[0].get<double>()), "verify_cost relative = us / us[0]");
        }
        expect(curves.insert({c.value("kernels", std::string()), c.at("n_seq").get<int>()}).second, "two curves of one kernels and n_seq");
    }

    const auto & results = doc.value("results", nlohmann::json::array());
    expect(!results.empty(), "no results");
    // (n_seq, temperature, kernels) -> tokens/s of plain decoding
    std::map<std::tuple<int, double, std::string>, double> plain_tps;
    for (const auto & r : results) {
        if (r.value("strategy", "") == "none") {
            const std::tuple<int, double, std::string> key{r.value("n_seq", 0), r.value("temperature", -1.0), r.value("kernels", "")};
            expect(!plain_tps.count(key), "two plain rows for n_seq " + std::to_string(std::get<0>(key)) + " at one temperature and kernels");
            plain_tps[key] = number(r, "tokens_per_second", "plain");
        }
    }
    for (const auto & r : results) {
        const std::string where = r.value("configuration", std::string("(no configuration)"));
        for (const char * key : {"configuration", "strategy"}) {
            expect(r.contains(key) && r[key].is_string(), where + ": no string " + key);
        }
        expect(r.contains("adaptive") && r["adaptive"].is_boolean(), where + ": no adaptive flag");
        const bool plain = r.value("strategy", "") == "none";
        const int n_seq = static_cast<int>(number(r, "n_seq", where));
        const double temperature = number(r, "temperature", where);
        const std::string accept = r.value("accept", std::string());
        expect(accept == "exact" || accept == "rejection", where + ": accept is neither exact nor rejection");
        expect(temperature > 0 || accept == "exact", where + ": a greedy row is exact");
        const std::string kernels = r.value("kernels", std::string());
        expect(kernels == "exact" || kernels == "fast", where + ": kernels is neither exact nor fast");
        expect(number(r, "prefill_ms", where) > 0, where + ": prefill_ms > 0");
        const std::tuple<int, double, std::string> key{n_seq, temperature, kernels};
        const double n_draft = number(r, "n_draft", where);
        const double tps = number(r, "tokens_per_second", where);
        const double speedup = number(r, "speedup", where);
        const double limit = number(r, "limit", where);
        const double achieved = number(r, "achieved_of_limit", where);
        const double acceptance = number(r, "acceptance", where);
        const double per_step = number(r, "tokens_per_step", where);
        const double shares = number(r, "verify_share", where) + number(r, "draft_share", where) + number(r, "bookkeeping_share", where);

        expect(plain_tps.count(key) == 1, where + ": no plain row with the same n_seq, temperature and kernels");
        // (--speedups-only measures no curve at all)
        expect(!doc.contains("verify_cost") || curves.count({kernels, n_seq}) == 1, where + ": no verification cost curve for its kernels and n_seq");
        expect(near(speedup, tps / plain_tps[key]), where + ": speedup is not tokens/s over plain's");
        // One ratio a round; the ratio of the medians lies within them (a
        // row at least r times plain's in every round has a median at least r times).
        const auto & by_round = r.value("speedup_by_round", nlohmann::json::array());
        expect(by_round.size() == doc.value("repeats", 0u), where + ": speedup_by_round needs one ratio a round");
        double lo = INFINITY;
        double hi = 0;
        for (const auto & x : by_round) {
            const double v = x.is_number() ? x.get<double>() : -1;
            expect(std::isfinite(v) && v > 0, where + ": a round's speedup is not a positive number");
            expect(!plain || near(v, 1), where + ": a plain row's round speedup is not 1");
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        expect(by_round.empty() || (speedup >= lo * (1 - 1e-9) && speedup <= hi * (1 + 1e-9)),
               where + ": speedup lies outside its rounds' speedups");
        // Exact against fast kernels: on an exact row whose fast twin ran (and only there), one ratio a
        // round for decoding and for prompt processing, each median among them.
        const bool twin = std::any_of(doc.at("results").begin(), doc.at("results").end(), [&](const nlohmann::json & f) {
            return f.value("configuration", std::string()) == r.value("configuration", std::string()) + " fast";
        });
        expect(r.contains("exact_over_fast") == (kernels == "exact" && twin), where + ": exact_over_fast belongs on an exact row with a fast twin");
        if (r.contains("exact_over_fast")) {
            for (const char * what : {"decoding", "prompt_processing"}) {
                const auto & e = r.at("exact_over_fast");
                const auto & rounds = e.value(std::string(what) + "_by_round", nlohmann::json::array());
                expect(rounds.size() == doc.value("repeats", 0u), where + ": exact_over_fast needs one " + what + " ratio a round");
                std::vector<double> v;
                for (const auto & x : rounds) {
                    v.push_back(x.is_number() ? x.get<double>() : -1);
                    expect(v.back() > 0, where + ": a round's exact / fast " + what + " ratio is not positive");
                }
                std::sort(v.begin(), v.end());
                const double median = v.empty() ? 0 : v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
                expect(!v.empty() && near(number(e, what, where), median), where + ": exact_over_fast's " + what + " is not its rounds' median");
            }
        }
        expect(limit > 0 && near(achieved, speedup / limit), where + ": achieved_of_limit is not speedup / limit");
        expect(acceptance <= 1, where + ": acceptance above 1");
        expect(std::fabs(shares - 1) < 0.01, where + ": time shares add up to " + std::to_string(shares));
        expect(per_step >= 1 - 1e-9 && per_step <= n_draft + 1 + 1e-9, where + ": tokens per step outside [1, n_draft + 1]");
        const auto & by_position = r.value("acceptance_by_position", nlohmann::json::array());
        expect(by_position.size() <= static_cast<size_t>(n_draft), where + ": acceptance for more positions than drafted");
        for (const auto & a : by_position) {
            expect(a.is_number() && a.get<double>() >= 0 && a.get<double>() <= 1, where + ": acceptance by position outside [0, 1]");
        }
        const auto & identical = r.value("identical_to_plain", nlohmann::json());
        if (plain) {
            expect(near(speedup, 1) && n_draft == 0 && acceptance == 0, where + ": plain row must have speedup 1, no drafts");
            expect(identical == true, where + ": plain row must be identical to itself");
            continue;
        }
        expect(n_draft >= 1, where + ": n_draft below 1");
        if (synthetic || accept == "rejection" || kernels == "fast") {
            // (rejection sampling keeps plain decoding's distribution, not its
            // draws; fast kernels promise nothing)
            expect(identical.is_null(), where + ": a synthetic, rejection-sampled or fast-kernel row cannot claim identity with plain decoding");
        } else {
            expect(identical == true, where + ": differs from plain decoding");
        }
        if (exact && kernels == "exact" && !synthetic && !r["adaptive"].get<bool>() && temperature == 0) {
            expect(acceptance == 1, where + ": an exact drafter accepted only " + std::to_string(acceptance));
        }
        if (r.contains("ours_over_upstream")) {
            const double up = number(r, "upstream_tokens_per_second", where);
            expect(up > 0 && near(number(r, "ours_over_upstream", where), tps / up), where + ": ours_over_upstream inconsistent");
        }
    }
    if (problems > 0) {
        return 1;
    }
    std::printf("check-bench-json: %zu results consistent\n", results.size());
    return 0;
}
