// `specdec bench`: how much faster each strategy and draft length is than
// plain decoding of the same target, measured in one process.
#pragma once

#include "cli-common.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cli {

struct bench_options {
    device_options           devices;                  // -ngl, --device, --rpc, ...
    std::string              model;                    // or, with `fixture`, a generated one
    std::string              fixture;                  // exact, mixed, random, soft or soft-matched: bench a generated MTP pair
    std::string              fixture_shape = "qwen3-0.6b"; // its dimensions: a preset of specdec::fixtures::shape_presets()
    std::string              fixture_type = "q4_k_m";  // its weights: a name of specdec::fixtures::weight_types()
    uint32_t                 fixture_blocks = 0;       // its trunk blocks; 0: the shape's
    double                   fixture_zipf = 0.0;       // > 0: its token ids relabelled to a Zipf law of this exponent
    std::string              draft_model;
    std::vector<std::string> kernels = {"exact"};      // CPU kernels, each run in turn: exact, fast (both: compared)
    llama_options            llama;                    // -ctk, -ctv, -fa, -b, -ub, -tb, --no-mmap, rope, --override-kv, ...
    draft_vocab_options      draft_vocab;              // --draft-vocab, --draft-vocab-file (MTP)
    std::vector<std::string> specs;                    // strategies to compare; empty: detected from the files
    std::vector<std::string> n_drafts = {"1", "2", "4", "8", "auto"}; // draft lengths swept per strategy; "auto": adaptive
    std::vector<int32_t>     n_seqs = {1};             // sequences decoded together, swept
    std::vector<float>       temperatures = {0.0f};    // swept; 0: greedy (seed 0 when sampling)
    std::vector<std::string> accept_modes = {"exact", "rejection"}; // swept when sampling
    std::string              prompt = "The quick brown fox jumps over the lazy dog.";
    std::string              prompt_file;              // the prompt read from this file instead
    int32_t                  n_predict = 64;           // tokens per sequence and run (end-of-generation ignored)
    int32_t                  repeats   = 3;            // rounds; every configuration runs once per round
    uint32_t                 n_ctx     = 2048;         // per sequence
    int32_t                  n_threads = 0;            // 0: hardware threads
    float                    synthetic_acceptance = -1.0f; // >= 0: drafts kept at random with this probability (speed only)
    std::string              json_path;                // write the results as JSON here
    std::string              markdown_path;            // write a Markdown report here
    std::string              chart_path;               // write a speedup chart here (.png or .svg)
    std::string              upstream;                 // llama.cpp's speculative-simple, run as the reference loop
    bool                     quiet = false;            // no progress lines on stderr
    bool                     speedups_only = false;    // no verification-cost curve, no oracle
    int32_t                  curve_rows = 0;           // verification-cost curve up to this many rows per sequence (0: longest draft + 1)
};

void add_bench_command(CLI::App & app, bench_options & opt);
int run_bench(const bench_options & opt);

} // namespace cli
