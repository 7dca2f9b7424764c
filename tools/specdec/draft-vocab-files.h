// The files that rank a restricted draft vocabulary. --draft-vocab-file
// reads two forms: token ids, most frequent first; or token counts, what
// `specdec rank-vocab` writes from text and `serve --draft-vocab-counts`
// keeps of what the server generated.
//
// Token counts: lines starting with '#' (comments) and blank lines anywhere;
// then `vocabulary N` (the model's vocabulary size), then `ID COUNT` for
// each token counted at least once (COUNT >= 1, each ID once), most counted
// first. Readers take the counts as given, whatever their order.
#pragma once

#include "llama.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cli {

// A decimal number that fills `word` (digits only: no sign, no blanks) and
// fits 64 bits, in `out`; false otherwise (out then unspecified).
bool parse_decimal(const std::string & word, uint64_t & out);

// The token ids of a ranking file (--draft-vocab-file), most frequent
// first: token counts (below), or whitespace-separated decimal ids where
// '#' starts a comment running to the end of its line. INVALID_ARGUMENT,
// naming the line, for an unreadable or empty file, a word that is not an
// id, an id at or above n_vocab (a file made for another vocabulary), an id
// given twice, or a malformed counts file.
std::vector<llama_token> read_ranking_file(const std::string & path, uint32_t n_vocab);

// The counts in `path`, one per token of an n_vocab vocabulary; nullopt
// when the file holds nothing but comments and blank lines. INVALID_ARGUMENT,
// naming `option` and the line, for a malformed file or one counted over
// another vocabulary size; IO_ERROR when it cannot be read.
std::optional<std::vector<uint64_t>> read_token_counts(const std::string & path, uint32_t n_vocab, const std::string & option);

// The file's text: `comment` (one line, without '#'), `vocabulary N`, then
// the tokens counted, most first (ties by id), at most `top` of them (0:
// all).
std::string format_token_counts(const std::vector<uint64_t> & counts, const std::string & comment, size_t top = 0);

// The ids counted, most first (ties by id).
std::vector<uint32_t> by_count(const std::vector<uint64_t> & counts);

// Writes `text` to `path` through a temporary file beside it, renamed over
// it, so that a failure leaves an existing file as it was. IO_ERROR naming
// `option`.
void write_file_replacing(const std::string & path, const std::string & text, const std::string & option);

} // namespace cli
