// The text side of one generated sequence: its text so far, the stop-string
// decision, and what may be streamed yet. Text is held back while it could
// still be the start of a stop string, or ends inside a multi-byte UTF-8
// character, so a stream never carries a stop string nor a broken character.
// Nothing here knows about tokens or models: a generation loop (or a serving
// engine, per request) feeds it each token's text.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specdec::detail {

// Length of the longest prefix of `s` that does not end inside a multi-byte
// UTF-8 character: `s.size()` unless its last bytes begin a character that
// needs more bytes than follow. Invalid bytes are not held (no later byte can
// complete them).
size_t utf8_complete_prefix(std::string_view s);

// Finds stop strings in a growing text.
class stop_matcher {
public:
    // Empty strings are not allowed (the generator validates them first).
    explicit stop_matcher(std::vector<std::string> stops);

    struct scan_result {
        size_t match;     // where the earliest stop string starts, or npos
        size_t undecided; // first position from which a stop string may still begin as the text grows (<= size)
    };

    // Scans `text` from position `from` (positions before it are known to
    // start no stop string). When several stop strings are present, the
    // earliest occurrence wins (at equal starts, any: the cut is the same).
    scan_result scan(std::string_view text, size_t from) const;

    bool empty() const { return stops_.empty(); }

private:
    std::vector<std::string> stops_;
};

// One sequence's text and its stream.
class text_stream {
public:
    // `stops` must outlive the stream.
    explicit text_stream(const stop_matcher & stops) : stops_(&stops) {}

    // Appends one token's text. Returns the text that may be streamed now
    // (possibly empty; valid until the next call): all of it when `last`
    // (the sequence ends with this piece). Once a stop string is found,
    // text() is cut before it, stopped() is true, the text before the cut is
    // released, and later calls return nothing.
    std::string_view push(std::string_view piece, bool last = false);

    // Releases everything still held (the sequence ended for another reason
    // than a stop string); a trailing incomplete UTF-8 character is released
    // as it is. Valid until the next call.
    std::string_view finish();

    bool stopped() const { return stopped_; }
    // Bytes of text() not streamed yet.
    size_t held() const { return text_.size() - released_; }
    const std::string & text() const { return text_; }
    std::string take_text() { return std::move(text_); }

private:
    std::string_view release_to(size_t end);

    const stop_matcher * stops_;
    std::string          text_;
    size_t               released_ = 0; // text_[0, released_) was streamed
    size_t               decided_  = 0; // no stop string starts before this position
    bool                 stopped_  = false;
};

} // namespace specdec::detail
