// `specdec serve --draft-vocab-counts FILE`: how often the server generated
// each token, kept in FILE across runs, and the ranking its restricted draft
// vocabulary (--draft-vocab) follows: the drafter scores the tokens the
// server generates most.
//
// The file: draft-vocab-files.h's token counts (`specdec rank-vocab` writes it
// too, so counts of text like the server's can start it). Read when the
// server starts (absent, or only comments and blank lines: no counts yet;
// absent: created, so that a path that cannot be written fails then);
// written through a temporary file beside it, renamed over it, at each
// re-ranking and when the server stops.
//
// Re-ranking (specdec_session_rank_draft_vocab) runs on the engine thread
// between steps, once the tokens counted since the last one reach as many as
// were counted before it, within [256, 65536]: often while little is known,
// rarely once the ranking has settled. Its cost is one row copy per token
// that enters the subset; the output does not change.
#pragma once

#include "specdec/specdec.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cli::serve {

class token_counts {
public:
    // Reads `path`, or creates it. INVALID_ARGUMENT, naming the line, for a
    // malformed file or one counted over another vocabulary size; IO_ERROR
    // when it can be neither read nor created.
    token_counts(std::string path, uint32_t n_vocab);

    // Engine thread, at a request's end: counts its output tokens.
    void add(std::span<const llama_token> tokens);
    // Engine thread, between steps (s: the session, null for plain
    // decoding): when a re-ranking is due, re-ranks s's restricted draft
    // vocabulary (when one is in effect) and writes the file. `force`: do it
    // now if anything was counted (at start, over the file's counts).
    // Returns a line for the log ("" when nothing was done); a failed write
    // is reported there, not thrown, since serving goes on without it.
    std::string rank(specdec::session * s, bool force = false);
    // Writes the file (at shutdown). Throws IO_ERROR.
    void save() const;

    uint64_t total() const { return total_; }

private:
    std::string           path_;
    std::vector<uint64_t> counts_;
    uint64_t              total_ = 0;       // tokens counted, the file's included
    uint64_t              total_ranked_ = 0; // total_ at the last re-ranking
};

} // namespace cli::serve
