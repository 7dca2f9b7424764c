// specdec: lossless speculative decoding from the command line.
//
//   specdec generate -m TARGET.gguf [-md DRAFT.gguf] [--spec auto|none|mtp|...] -p PROMPT ...
//   specdec inspect MODEL.gguf [DRAFT.gguf]
//
// Generated text goes to stdout; statistics, logs and progress to stderr.
// Exit codes: 0 success, 1 a library error or an incompatible pair, 2 usage.
#include "cli-common.h"
#include "cmd-generate.h"
#include "cmd-inspect.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

int main(int argc, char ** argv) {
    CLI::App app{"specdec: lossless speculative decoding for GGUF models on llama.cpp"};
    app.require_subcommand(1);
    int verbosity = 0;
    app.add_flag("-v,--verbose", verbosity, "show llama.cpp's log (-v warnings, -vv everything)");

    cli::generate_options gen;
    cli::add_generate_command(app, gen);
    cli::inspect_options insp;
    cli::add_inspect_command(app, insp);

    // llama.cpp's tools spell the draft model "-md"; CLI11 takes one-letter
    // short names only, so map it to the long form.
    std::vector<std::string> args;
    for (int i = argc - 1; i > 0; --i) {
        const std::string a = argv[i];
        args.push_back(a == "-md" ? "--model-draft" : a);
    }
    try {
        app.parse(args);
    } catch (const CLI::ParseError & e) {
        const int rc = app.exit(e);
        return rc == 0 ? cli::exit_ok : cli::exit_usage;
    }
    cli::set_verbosity(verbosity);
    if (verbosity >= 2) {
        specdec_set_upstream_log_level(3); // the drafters' own information lines
    }
    llama_backend_init();
    int rc = cli::exit_ok;
    try {
        if (app.got_subcommand("generate")) {
            rc = cli::run_generate(gen);
        } else {
            rc = cli::run_inspect(insp);
        }
    } catch (const specdec::error & e) {
        rc = cli::report(e);
    }
    llama_backend_free();
    return rc;
}
