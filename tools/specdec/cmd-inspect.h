// `specdec inspect`: what a GGUF file (or a target/draft pair) can serve,
// from metadata alone.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace cli {

struct inspect_options {
    std::string model;
    std::string draft_model;
    std::string spec = "auto"; // strategy to check the pair for
    bool        json = false;
};

void add_inspect_command(CLI::App & app, inspect_options & opt);
int run_inspect(const inspect_options & opt);

} // namespace cli
