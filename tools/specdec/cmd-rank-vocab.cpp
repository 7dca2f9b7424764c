#include "cmd-rank-vocab.h"

#include "cli-common.h"
#include "progress-line.h"
#include "draft-vocab-files.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include <unistd.h>

namespace cli {

void add_rank_vocab_command(CLI::App & app, rank_vocab_options & o) {
    CLI::App * cmd = app.add_subcommand("rank-vocab", "count the tokens of text files with a model's tokenizer, most frequent "
                                                      "first: a ranking for --draft-vocab-file, counts to start serve "
                                                      "--draft-vocab-counts from");
    cmd->add_option("-m,--model", o.model, "model (GGUF) whose tokenizer counts; only its vocabulary is loaded")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("text", o.texts, "text files to count")->required()->check(CLI::ExistingFile);
    cmd->add_option("-o,--output", o.output, "write the counts here (default: stdout)");
    cmd->add_option("--top", o.top, "write at most this many tokens, the most frequent (0: every token counted)")
        ->check(CLI::Range(0, 1 << 30))
        ->capture_default_str();
    cmd->add_flag("-q,--quiet", o.quiet, "no progress on stderr");
}

namespace {

// Texts are tokenized in pieces of about this many bytes, so that the token
// buffer stays small. A piece ends after a newline that a character other than
// white space follows: the BPE pre-tokenizers of the models with MTP heads
// end a token there, so the counts are those of the whole text.
constexpr size_t piece_bytes = size_t{1} << 20;

// Where the piece of `text` that starts at `begin` ends.
size_t piece_end(const std::string & text, size_t begin) {
    const size_t limit = begin + piece_bytes;
    if (limit >= text.size()) {
        return text.size();
    }
    for (size_t i = limit; i > begin; --i) {
        const char next = text[i];
        if (text[i - 1] == '\n' && next != ' ' && next != '\t' && next != '\n' && next != '\r') {
            return i;
        }
    }
    return limit; // no such newline: a line of a mebibyte or more
}

} // namespace

int run_rank_vocab(const rank_vocab_options & o) {
    specdec_model_info info{};
    if (const specdec_status st = specdec_inspect(o.model.c_str(), &info); st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, o.model + ": " + specdec_last_error());
    }
    // The counts are written beside --output and renamed over it at the end,
    // so that a run that fails leaves an existing file as it was; its folder
    // is checked before any work.
    const std::filesystem::path output(o.output);
    const std::filesystem::path folder = output.has_parent_path() ? output.parent_path() : ".";
    if (!o.output.empty() && (!std::filesystem::is_directory(folder) || access(folder.c_str(), W_OK) != 0)) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "--output " + o.output + ": cannot be written (no folder " +
                                                          folder.string() + " to write in)");
    }
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    const std::unique_ptr<llama_model, decltype(&llama_model_free)> model(llama_model_load_from_file(o.model.c_str(), mp),
                                                                          &llama_model_free);
    if (model == nullptr) {
        throw specdec::error(SPECDEC_STATUS_NATIVE_FAILURE, o.model + ": llama.cpp could not load its vocabulary");
    }
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const auto n_vocab = static_cast<size_t>(llama_vocab_n_tokens(vocab));
    std::vector<uint64_t> counts(n_vocab, 0);
    uint64_t n_counted = 0;
    progress_line progress("rank-vocab", o.quiet);
    std::vector<llama_token> tokens;
    for (const std::string & path : o.texts) {
        const std::string text = read_file(path);
        const auto kib = [](size_t bytes) { return std::to_string((bytes + 1023) >> 10); };
        progress.step(path + ": " + kib(text.size()) + " KiB");
        for (size_t begin = 0; begin < text.size();) {
            const size_t end = piece_end(text, begin);
            tokens.resize(end - begin + 16); // a token covers a byte at least, but for a leading space a tokenizer adds
            size_t n = 0;
            if (const specdec_status st = specdec_tokenize(vocab, text.data() + begin, end - begin, false, false, tokens.data(),
                                                           tokens.size(), &n);
                st != SPECDEC_STATUS_OK) {
                throw specdec::error(st, path + ", bytes " + std::to_string(begin) + "-" + std::to_string(end) + ": " +
                                             specdec_last_error());
            }
            for (size_t i = 0; i < n; ++i) {
                ++counts[static_cast<size_t>(tokens[i])];
            }
            n_counted += n;
            begin = end;
            progress.update(path + ": " + kib(begin) + "/" + kib(text.size()) + " KiB, " + std::to_string(n_counted) + " tokens");
        }
    }
    progress.clear();
    if (n_counted == 0) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "the text files hold no tokens");
    }
    const std::string text = format_token_counts(counts, "specdec rank-vocab: the tokens of " + std::to_string(o.texts.size()) +
                                                             " text file(s) by " + o.model + "'s tokenizer, most first (token id, count)",
                                                 static_cast<size_t>(o.top));
    if (o.output.empty()) {
        std::fputs(text.c_str(), stdout);
    } else {
        write_file_replacing(o.output, text, "--output");
    }
    return exit_ok;
}

} // namespace cli
