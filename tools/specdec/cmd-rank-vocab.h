// `specdec rank-vocab`: token counts of text by a model's tokenizer, in
// draft-vocab-files.h's form: a ranking for a restricted draft vocabulary
// (--draft-vocab-file), or counts to start serve --draft-vocab-counts from.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace cli {

struct rank_vocab_options {
    std::string              model;  // any GGUF with the tokenizer; only its vocabulary is loaded
    std::vector<std::string> texts;  // text files to count
    std::string              output; // the counts file; empty: stdout
    int32_t                  top = 0; // write at most this many tokens; 0: every token counted
    bool                     quiet = false;
};

void add_rank_vocab_command(CLI::App & app, rank_vocab_options & opt);
int run_rank_vocab(const rank_vocab_options & opt);

} // namespace cli
