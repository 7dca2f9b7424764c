#include "cli-app.h"

#include "cmd-info.h"

#include <map>

namespace cli {

void configure(CLI::App & app, options & o) {
    app.require_subcommand(1);
    app.set_version_flag("--version", version_line());
    add_generate_command(app, o.generate);
    add_inspect_command(app, o.inspect);
    add_rank_vocab_command(app, o.rank_vocab);
    add_bench_command(app, o.bench);
    add_info_command(app, o.info);
    add_serve_command(app, o.serve);
    // -v is accepted before the subcommand and within it.
    const char * verbose_help = "show llama.cpp's log on stderr (-v warnings and errors, -vv everything)";
    app.add_flag("-v,--verbose", o.verbosity, verbose_help);
    for (CLI::App * sub : app.get_subcommands({})) {
        sub->add_flag("-v,--verbose", o.verbosity, verbose_help);
    }
}

void parse(CLI::App & app, const std::vector<std::string> & args) {
    // llama.cpp's multi-letter short options, which CLI11 cannot declare.
    static const std::map<std::string, std::string> long_names = {
        {"-md", "--model-draft"},         {"-ngl", "--n-gpu-layers"}, {"-ngld", "--n-gpu-layers-draft"},
        {"-dev", "--device"},             {"-devd", "--device-draft"}, {"-sm", "--split-mode"},
        {"-np", "--parallel"},            {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"},
        {"-fa", "--flash-attn"},          {"-ub", "--ubatch-size"},   {"-tb", "--threads-batch"},
        {"-lm", "--load-mode"},           {"-to", "--timeout"},
        {"-cram", "--cache-ram"},
    };
    std::vector<std::string> reversed; // CLI11 consumes arguments from the back
    for (auto it = args.rbegin(); it != args.rend(); ++it) {
        const auto renamed = long_names.find(*it);
        reversed.push_back(renamed == long_names.end() ? *it : renamed->second);
    }
    app.parse(reversed);
}

} // namespace cli
