// `specdec generate`: run a target (and drafter) on prompts.
#pragma once

#include "cli-common.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cli {

struct generate_options {
    decoder_options          decoder;                  // -m, -md, --spec, -c, -t, --n-draft, placement, ...
    std::vector<std::string> prompts;
    std::string              prompt_file;
    int32_t                  n_predict   = 128;
    float                    temperature = 0.0f;
    int32_t                  top_k       = 0;
    float                    top_p       = 1.0f;
    float                    min_p       = 0.0f;
    uint32_t                 seed        = 0;
    std::string              accept      = "rejection"; // specdec_accept_mode by name (accept_mode_of)
    std::vector<std::string> stop;
    bool                     ignore_eos  = false;
    bool                     json        = false;
};

void add_generate_command(CLI::App & app, generate_options & opt);
int run_generate(const generate_options & opt);

} // namespace cli
