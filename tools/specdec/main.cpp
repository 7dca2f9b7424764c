// specdec: lossless speculative decoding from the command line.
//
//   specdec generate -m TARGET.gguf [-md DRAFT.gguf] [--spec auto|none|mtp|...] -p PROMPT ...
//   specdec inspect MODEL.gguf [DRAFT.gguf]
//
// Generated text goes to stdout; statistics, logs and progress to stderr.
// Exit codes: 0 success, 1 a library error or an incompatible pair, 2 usage.
#include "cli-app.h"
#include "cli-common.h"

int main(int argc, char ** argv) {
    CLI::App app{"specdec: lossless speculative decoding for GGUF models on llama.cpp"};
    cli::options opt;
    cli::configure(app, opt);
    try {
        cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
    } catch (const CLI::ParseError & e) {
        const int rc = app.exit(e);
        return rc == 0 ? cli::exit_ok : cli::exit_usage;
    }
    cli::set_verbosity(opt.verbosity);
    if (opt.verbosity >= 2) {
        specdec_set_upstream_log_level(3); // the drafters' own information lines
    }
    llama_backend_init();
    int rc = cli::exit_ok;
    try {
        if (app.got_subcommand("generate")) {
            rc = cli::run_generate(opt.generate);
        } else if (app.got_subcommand("inspect")) {
            rc = cli::run_inspect(opt.inspect);
        } else {
            rc = cli::run_bench(opt.bench);
        }
    } catch (const specdec::error & e) {
        rc = cli::report(e);
    }
    llama_backend_free();
    return rc;
}
