// The command line itself: every option of every subcommand, and parsing.
#pragma once

#include "cmd-bench.h"
#include "cmd-generate.h"
#include "cmd-info.h"
#include "cmd-inspect.h"
#include "cmd-rank-vocab.h"
#include "cmd-serve.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace cli {

struct options {
    int                verbosity = 0;
    generate_options   generate;
    inspect_options    inspect;
    rank_vocab_options rank_vocab;
    bench_options      bench;
    info_options       info;
    serve_options      serve;
};

// Declares the subcommands and their options on `app`, bound to `o`.
void configure(CLI::App & app, options & o);

// Parses arguments (without the program name). llama.cpp's tools spell some
// options with several letters after one dash (-md, -ngl, -ngld, -dev,
// -devd, -sm, -np), which CLI11 cannot declare, so they are read as their long
// names. Throws CLI::ParseError.
void parse(CLI::App & app, const std::vector<std::string> & args);

} // namespace cli
