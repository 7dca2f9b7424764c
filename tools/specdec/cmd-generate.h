// `specdec generate`: run a target (and drafter) on prompts.
#pragma once

#include "cli-common.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cli {

struct generate_options {
    device_options           devices;                  // -ngl, --device, --rpc, ...
    std::string              model;
    std::string              draft_model;
    std::string              spec = "auto";        // auto, none, or a strategy name
    std::vector<std::string> prompts;
    std::string              prompt_file;
    int32_t                  n_predict   = 128;
    uint32_t                 n_ctx       = 4096;
    int32_t                  n_threads   = 0;      // 0: hardware threads
    std::string              n_draft     = "3";    // tokens per step, or "auto" (adaptive)
    int32_t                  n_draft_max = 0;      // the session's cap; 0: n_draft, or 8 with auto
    int32_t                  n_draft_min = 0;
    float                    p_min       = 0.0f;
    float                    temperature = 0.0f;
    int32_t                  top_k       = 0;
    float                    top_p       = 1.0f;
    float                    min_p       = 0.0f;
    uint32_t                 seed        = 0;
    std::vector<std::string> stop;
    bool                     ignore_eos  = false;
    bool                     json        = false;
};

void add_generate_command(CLI::App & app, generate_options & opt);
int run_generate(const generate_options & opt);

} // namespace cli
