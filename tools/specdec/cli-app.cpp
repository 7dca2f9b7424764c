#include "cli-app.h"

namespace cli {

void configure(CLI::App & app, options & o) {
    app.require_subcommand(1);
    app.add_flag("-v,--verbose", o.verbosity, "show llama.cpp's log (-v warnings, -vv everything)");
    add_generate_command(app, o.generate);
    add_inspect_command(app, o.inspect);
    add_bench_command(app, o.bench);
}

void parse(CLI::App & app, const std::vector<std::string> & args) {
    std::vector<std::string> reversed; // CLI11 consumes arguments from the back
    for (auto it = args.rbegin(); it != args.rend(); ++it) {
        reversed.push_back(*it == "-md" ? "--model-draft" : *it);
    }
    app.parse(reversed);
}

} // namespace cli
