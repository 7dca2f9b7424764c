// specdec: lossless speculative decoding from the command line.
//
//   specdec generate -m TARGET.gguf [-md DRAFT.gguf] [--spec auto|none|mtp|...] -p PROMPT ...
//   specdec inspect MODEL.gguf [DRAFT.gguf]
//   specdec rank-vocab -m MODEL.gguf TEXT...   token counts of text, for --draft-vocab-file
//   specdec bench -m TARGET.gguf ... | --fixture exact|mixed|random
//   specdec serve -m TARGET.gguf [--port 8080] [-np 4] ...   OpenAI-compatible HTTP server
//   specdec info                  versions, CPU kernels, devices
//   specdec --version
//
// Generated text goes to stdout; statistics, logs and progress to stderr.
// Exit codes: 0 success, 1 a library error, an incompatible pair or any
// other failure (always with a message), 2 usage.
#include "cli-app.h"
#include "cli-common.h"

#include "ggml.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

#include <unistd.h>

namespace {

// llama.cpp ends the process through ggml_abort on failures it cannot
// report (in v0.5.0, among others, an RPC server lost mid-generation). The
// text streamed so far is on stdout already; this says what happened, with
// the documented exit code 1 instead of SIGABRT. It may run on any thread.
void on_llama_abort(const char * message) {
    std::fflush(stdout);
    static const char prefix[] = "\nspecdec: error: NATIVE_FAILURE: llama.cpp stopped the process: ";
    [[maybe_unused]] ssize_t w = write(STDERR_FILENO, prefix, sizeof(prefix) - 1);
    w = write(STDERR_FILENO, message, std::strlen(message));
    w = write(STDERR_FILENO, "\n", 1);
    _exit(cli::exit_failure);
}

int run(const CLI::App & app, const cli::options & opt) {
    if (app.got_subcommand("info")) {
        return cli::run_info(opt.info);
    }
    // A build for extensions this CPU lacks would die with SIGILL in the
    // first matrix product; say so instead.
    if (const auto missing = cli::cpu_features_missing(); !missing.empty()) {
        std::string names;
        for (const auto & m : missing) {
            names += " " + m;
        }
        std::fprintf(stderr, "specdec: error: this build's CPU kernels use%s, which this CPU lacks; "
                             "rebuild with SPECDEC_CPU=auto (see `specdec info`)\n", names.c_str());
        return cli::exit_failure;
    }
    if (app.got_subcommand("generate")) {
        return cli::run_generate(opt.generate);
    }
    if (app.got_subcommand("inspect")) {
        return cli::run_inspect(opt.inspect);
    }
    if (app.got_subcommand("rank-vocab")) {
        return cli::run_rank_vocab(opt.rank_vocab);
    }
    if (app.got_subcommand("serve")) {
        cli::serve_options serve = opt.serve;
        serve.verbosity = opt.verbosity;
        return cli::run_serve(serve);
    }
    return cli::run_bench(opt.bench);
}

} // namespace

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
    ggml_set_abort_callback(on_llama_abort);
    // A write to a lost RPC server (or a closed pipe) fails with EPIPE instead of killing the process.
    std::signal(SIGPIPE, SIG_IGN);
    if (opt.verbosity >= 2) {
        specdec_set_upstream_log_level(3); // the drafters' own information lines
    }
    llama_backend_init();
    int rc = cli::exit_ok;
    try {
        rc = run(app, opt);
    } catch (const specdec::error & e) {
        rc = cli::report(e);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "specdec: error: %s\n", e.what());
        rc = cli::exit_failure;
    } catch (...) {
        std::fprintf(stderr, "specdec: error: unexpected failure\n");
        rc = cli::exit_failure;
    }
    llama_backend_free();
    return rc;
}
