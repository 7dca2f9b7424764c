// `specdec info` and `specdec --version`: what this build is, which CPU
// kernels it runs, and which ggml devices it finds.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace cli {

struct info_options {
    bool        json = false;
    std::string rpc;            // RPC servers to add (and list) as devices
};

void add_info_command(CLI::App & app, info_options & opt);
int run_info(const info_options & opt);

// "specdec 0.3.0 (llama.cpp v0.5.0, commit de3ff81...)".
std::string version_line();

// The instruction-set extensions llama.cpp's CPU kernels were compiled with
// that this CPU lacks (empty when the build runs here). A program that used
// them would stop with SIGILL in the first matrix product.
std::vector<std::string> cpu_features_missing();

} // namespace cli
