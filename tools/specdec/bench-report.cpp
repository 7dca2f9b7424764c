#include "bench-report.h"

#include "cli-common.h"

#include "specdec/specdec.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <sys/wait.h>

namespace cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    return buf;
}

std::string percent(double fraction, int decimals) {
    return fixed(100 * fraction, decimals) + "%";
}

// The lowest and highest of a row's per-round speedups, "0.91-0.99" (one
// value when they are equal to two decimals).
std::string round_range(const json & by_round) {
    const auto [lo, hi] = std::minmax_element(by_round.begin(), by_round.end(),
                                              [](const json & a, const json & b) { return a.get<double>() < b.get<double>(); });
    if (lo == by_round.end()) {
        return "—";
    }
    const std::string a = fixed(lo->get<double>(), 2);
    const std::string b = fixed(hi->get<double>(), 2);
    return a == b ? a : a + "-" + b;
}

bool is_synthetic(const json & bench) {
    const auto it = bench.find("synthetic_acceptance");
    return it != bench.end() && !it->is_null();
}

void write_text(const std::string & path, const std::string & text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    f.close();
    if (!f) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot write '" + path + "': check that its directory exists and is writable");
    }
}

// A gnuplot single-quoted string: no escapes but '' for a quote.
std::string gp_quote(const std::string & s) {
    std::string out = "'";
    for (char c : s) {
        out += c == '\'' ? std::string("''") : c == '\n' ? std::string(" ") : std::string(1, c);
    }
    return out + "'";
}

// The gnuplot script: terminal, axes, one data block per series, the plot.
std::string chart_script(const json & bench, bool svg) {
    struct series {
        std::vector<std::pair<int, const json *>> fixed;    // by n_draft
        std::vector<const json *>                 adaptive;
    };
    std::map<std::pair<std::string, int>, series> by_strategy; // (strategy, n_seq)
    std::set<int> xs;
    for (const auto & r : bench.at("results")) {
        const std::string strategy = r.at("strategy").get<std::string>();
        if (strategy == "none") {
            continue;
        }
        series & s = by_strategy[{strategy, r.value("n_seq", 1)}];
        const int n_draft = r.at("n_draft").get<int>();
        if (r.value("adaptive", false)) {
            s.adaptive.push_back(&r);
        } else {
            s.fixed.emplace_back(n_draft, &r);
        }
        xs.insert(n_draft);
    }
    if (xs.empty()) {
        xs.insert(1);
    }

    std::string title = "speedup over plain decoding: " + fs::path(bench.at("model").get<std::string>()).filename().string();
    if (is_synthetic(bench)) {
        title += " (SYNTHETIC acceptance " + fixed(bench["synthetic_acceptance"].get<double>(), 2) + ": speeds only)";
    }
    std::string tics;
    for (int x : xs) {
        tics += (tics.empty() ? "" : ", ") + std::to_string(x);
    }

    std::string gp;
    gp += svg ? "set terminal svg size 1000,600 noenhanced background rgb 'white'\n"
              : "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                "    set terminal pngcairo size 1000,600 noenhanced\n"
                "} else {\n"
                "    set terminal png size 1000,600 noenhanced\n"
                "}\n";
    gp += "set output ARG1\n";
    gp += "set title " + gp_quote(title) + "\n";
    gp += "set xlabel 'draft length (tokens; adaptive rows at their cap)'\n";
    gp += "set ylabel 'speedup over plain decoding'\n";
    gp += "set logscale x 2\n";
    gp += "set xtics (" + tics + ")\n";
    gp += "set xrange [" + fixed(*xs.begin() / 1.4, 3) + ":" + fixed(*xs.rbegin() * 1.4, 3) + "]\n";
    gp += "set yrange [0:*]\n";
    gp += "set offsets 0, 0, graph 0.05, 0\n"; // keeps the reference at 1 off the top border
    gp += "set grid\n";
    gp += "set key top left\n";

    static const char * colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
    std::string plot = "plot 1 with lines lc rgb 'gray40' lw 1.5 title 'plain decoding'";
    size_t i = 0;
    bool any_fixed = false;
    bool any_adaptive = false;
    for (auto & [key, s] : by_strategy) {
        any_fixed = any_fixed || !s.fixed.empty();
        any_adaptive = any_adaptive || !s.adaptive.empty();
        const std::string rgb = std::string("rgb '") + colours[i % std::size(colours)] + "'";
        const std::string name = key.first + (key.second > 1 ? " x" + std::to_string(key.second) : "");
        const std::string id = std::to_string(i++);
        if (!s.fixed.empty()) {
            std::sort(s.fixed.begin(), s.fixed.end(), [](const auto & a, const auto & b) { return a.first < b.first; });
            gp += "$fixed" + id + " << EOD\n";
            for (const auto & [n_draft, r] : s.fixed) {
                gp += std::to_string(n_draft) + " " + fixed(r->at("speedup").get<double>(), 4) + " " +
                      fixed(r->at("limit").get<double>(), 4) + "\n";
            }
            gp += "EOD\n";
            plot += ", \\\n    $fixed" + id + " using 1:2 with linespoints lc " + rgb + " pt 7 lw 2 title " + gp_quote(name);
            plot += ", \\\n    $fixed" + id + " using 1:3 with lines lc " + rgb + " dt 2 lw 1.5 notitle";
        }
        if (!s.adaptive.empty()) {
            gp += "$adaptive" + id + " << EOD\n";
            for (const json * r : s.adaptive) {
                gp += std::to_string(r->at("n_draft").get<int>()) + " " + fixed(r->at("speedup").get<double>(), 4) + "\n";
            }
            gp += "EOD\n";
            plot += ", \\\n    $adaptive" + id + " using 1:2 with points lc " + rgb + " pt 9 ps 2.5 " +
                    (s.fixed.empty() ? "title " + gp_quote(name + " (adaptive)") : std::string("notitle"));
            plot += ", \\\n    $adaptive" + id + " using 1:2:('auto') with labels left offset 1.2,0 tc " + rgb + " notitle";
        }
    }
    if (any_fixed) {
        plot += ", \\\n    NaN with lines lc rgb 'black' dt 2 lw 1.5 title 'limit (ideal loop)'";
    }
    if (any_adaptive) {
        plot += ", \\\n    NaN with points lc rgb 'black' pt 9 ps 2 title 'adaptive, at its cap'";
    }
    return gp + plot + "\n";
}

// Exact against fast kernels, from the same run: each configuration's
// decoding speed and prompt processing, and the verification-cost curve,
// as the exact kernels' speed over the fast ones' (1: they cost nothing).
// A configuration's speed is the median of each round's own ratio (its two
// runs one after the other), with the rounds' range beside it.
std::string kernels_table(const json & bench) {
    std::string out = "\n| exact / fast | tokens/s exact | fast | speed | rounds | prompt ms exact | fast | speed | rounds |\n"
                      "|---|---|---|---|---|---|---|---|---|\n";
    const json & results = bench.at("results");
    auto range = [](const json & v) {
        const auto [lo, hi] = std::minmax_element(v.begin(), v.end(), [](const json & a, const json & b) { return a.get<double>() < b.get<double>(); });
        return lo == v.end() ? std::string("—") : fixed(lo->get<double>(), 2) + "-" + fixed(hi->get<double>(), 2);
    };
    for (const auto & r : results) {
        if (!r.contains("exact_over_fast")) {
            continue;
        }
        const std::string name = r.at("configuration").get<std::string>();
        const auto fast = std::find_if(results.begin(), results.end(), [&](const json & f) { return f.at("configuration") == name + " fast"; });
        if (fast == results.end()) {
            continue;
        }
        const json & ratio = r.at("exact_over_fast");
        out += "| " + name + " | " + fixed(r.at("tokens_per_second").get<double>(), 1) + " | " + fixed(fast->at("tokens_per_second").get<double>(), 1) +
               " | " + fixed(ratio.at("decoding").get<double>(), 2) + " | " + range(ratio.at("decoding_by_round")) + " | " +
               fixed(r.at("prefill_ms").get<double>(), 0) + " | " + fixed(fast->at("prefill_ms").get<double>(), 0) + " | " +
               fixed(ratio.at("prompt_processing").get<double>(), 2) + " | " + range(ratio.at("prompt_processing_by_round")) + " |\n";
    }
    const json curves = bench.value("verify_cost", json::array());
    for (const auto & e : curves) {
        if (e.at("kernels") != "exact") {
            continue;
        }
        for (const auto & f : curves) {
            if (f.at("kernels") != "fast" || f.at("n_seq") != e.at("n_seq")) {
                continue;
            }
            const int n_seq = e.at("n_seq").get<int>();
            const auto & a = e.at("microseconds");
            const auto & b = f.at("microseconds");
            out += "\n| verifying, " + std::to_string(n_seq) + (n_seq > 1 ? " sequences" : " sequence") +
                   ": rows each | µs exact | fast | speed |\n|---|---|---|---|\n";
            for (size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
                const double x = a[k].get<double>();
                const double y = b[k].get<double>();
                out += "| " + std::to_string(k + 1) + " | " + fixed(x, 0) + " | " + fixed(y, 0) + " | " + fixed(x > 0 ? y / x : 0.0, 2) + " |\n";
            }
        }
    }
    return out;
}

} // namespace

std::string bench_markdown_table(const json & bench) {
    const json & results = bench.at("results");
    const bool upstream = std::any_of(results.begin(), results.end(), [](const json & r) { return r.contains("ours_over_upstream"); });
    std::string out = "| configuration | tokens/s | speedup | rounds | limit | achieved/limit | acceptance | tokens/step | verify | draft | bookkeeping | identical |";
    std::string rule = "|---|---|---|---|---|---|---|---|---|---|---|---|";
    if (upstream) {
        out += " ours/upstream |";
        rule += "---|";
    }
    out += "\n" + rule + "\n";
    for (const auto & r : results) {
        const json & identical = r.at("identical_to_plain");
        out += "| " + r.at("configuration").get<std::string>() +
               " | " + fixed(r.at("tokens_per_second").get<double>(), 1) +
               " | " + fixed(r.at("speedup").get<double>(), 2) +
               " | " + round_range(r.at("speedup_by_round")) +
               " | " + fixed(r.at("limit").get<double>(), 2) +
               " | " + percent(r.at("achieved_of_limit").get<double>(), 0) +
               " | " + fixed(r.at("acceptance").get<double>(), 2) +
               " | " + fixed(r.at("tokens_per_step").get<double>(), 2) +
               " | " + percent(r.at("verify_share").get<double>(), 0) +
               " | " + percent(r.at("draft_share").get<double>(), 0) +
               " | " + percent(r.at("bookkeeping_share").get<double>(), 1) +
               " | " + (identical.is_null() ? "n/a" : identical.get<bool>() ? "yes" : "NO") + " |";
        if (upstream) {
            out += r.contains("ours_over_upstream") ? " " + fixed(r["ours_over_upstream"].get<double>(), 2) + " |" : " |";
        }
        out += "\n";
    }
    if (bench.value("kernels", json::array()).size() > 1) {
        out += kernels_table(bench);
    }
    if (bench.contains("oracle")) {
        out += "\n| oracle | tokens/s | speedup | tokens/step | auto / oracle |\n|---|---|---|---|---|\n";
        for (const auto & x : bench["oracle"]) {
            const int n_seq = x.at("n_seq").get<int>();
            std::string of;
            for (const auto & r : results) {
                if (r.contains("of_oracle") && r.at("strategy") == x.at("strategy") && r.value("n_seq", 1) == n_seq) {
                    of += (of.empty() ? "" : ", ") + fixed(r["of_oracle"].get<double>(), 2);
                }
            }
            out += "| " + x.at("strategy").get<std::string>() + (n_seq > 1 ? " x" + std::to_string(n_seq) : "") +
                   " | " + fixed(x.at("tokens_per_second").get<double>(), 1) +
                   " | " + fixed(x.at("speedup").get<double>(), 2) +
                   " | " + fixed(x.at("tokens_per_step").get<double>(), 2) +
                   " | " + (of.empty() ? "—" : of) + " |\n";
        }
    }
    return out;
}

void write_bench_markdown(const json & bench, const std::string & path) {
    std::string md = "# specdec bench\n\n";
    md += "- model: `" + bench.at("model").get<std::string>() + "`\n";
    const std::string draft = bench.value("draft_model", "");
    if (!draft.empty()) {
        md += "- draft model: `" + draft + "`\n";
    }
    md += "- tokens per run: " + std::to_string(bench.at("n_predict").get<int>()) + "\n";
    md += "- rounds: " + std::to_string(bench.at("repeats").get<int>()) + " (medians shown)\n";
    md += "- threads: " + std::to_string(bench.at("threads").get<int>()) + "\n";
    if (const auto v = bench.find("draft_vocab"); v != bench.end() && v->is_number()) {
        const int n = v->get<int>();
        md += "- MTP draft vocabulary: " + (n > 0 ? std::to_string(n) + " tokens" : std::string("the whole vocabulary")) + "\n";
    }
    md += std::string("- kernels: ") +
          (bench.value("kernels", json::array()).size() > 1
               ? "exact and fast, each configuration under both in turn (rows \"... fast\"); the first given is the oracle's"
           : bench.value("exact_kernels", false) ? "exact (each row of a batch computed as alone)"
                                                 : "fast (batch-dependent; output may differ from plain decoding)") +
          "\n\n";
    const bool synthetic = is_synthetic(bench);
    if (synthetic) {
        md += "**WARNING: synthetic acceptance " + fixed(bench["synthetic_acceptance"].get<double>(), 2) +
              ": drafted tokens were accepted at random. The text is NOT valid output; these numbers measure speed only.**\n\n";
    }
    md += bench_markdown_table(bench) + "\n";

    std::string differing;
    for (const auto & r : bench.at("results")) {
        const json & identical = r.at("identical_to_plain");
        if (identical.is_boolean() && !identical.get<bool>()) {
            differing += (differing.empty() ? "" : ", ") + r.at("configuration").get<std::string>();
        }
    }
    md += synthetic           ? "Not compared with plain decoding: acceptance was synthetic.\n"
          : differing.empty() ? "Every run was identical to plain decoding.\n"
                              : "**Not identical to plain decoding: " + differing + ".**\n";
    write_text(path, md);
}

void write_bench_chart(const json & bench, const std::string & path) {
    std::string ext = fs::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext != ".png" && ext != ".svg") {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot tell the chart format of '" + path + "': name it .png or .svg");
    }
    const temp_dir dir("specdec-chart-");
    const fs::path script = dir.path() / "chart.gp";
    const fs::path chart  = dir.path() / ("chart" + ext);
    const fs::path log    = dir.path() / "gnuplot.log";
    write_text(script.string(), chart_script(bench, ext == ".svg"));
    // `gnuplot -c script output`: the script reads the output path as ARG1.
    const int status = run_program({"gnuplot", "-c", script.string(), chart.string()}, log,
                                   "install gnuplot-nox (scripts/bootstrap.sh does)");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                                  : "signal " + std::to_string(WTERMSIG(status));
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "gnuplot failed (" + how + "): " + file_tail(log, 600));
    }
    std::error_code ec;
    const auto size = fs::file_size(chart, ec);
    if (ec || size == 0) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "gnuplot wrote no chart: " + file_tail(log, 600));
    }
    fs::copy_file(chart, path, fs::copy_options::overwrite_existing, ec);
    if (ec) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot write the chart to '" + path + "': " + ec.message() +
                                                          " (check that its directory exists and is writable)");
    }
}

} // namespace cli
