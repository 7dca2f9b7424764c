// The CLI's argument parsing on arbitrary argument lists (the input split at
// NUL bytes): parsed, or a CLI11 parse error; never a crash. Nothing runs.
#include "cli-app.h"

#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    std::vector<std::string> args(1);
    for (size_t i = 0; i < size; ++i) {
        if (data[i] == 0) {
            args.emplace_back();
        } else {
            args.back().push_back(static_cast<char>(data[i]));
        }
    }
    CLI::App app{"fuzz"};
    cli::options opt;
    cli::configure(app, opt);
    try {
        cli::parse(app, args);
    } catch (const CLI::ParseError &) {
        // the expected outcome for most inputs
    }
    return 0;
}
