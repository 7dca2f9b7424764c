#include "text-stream.h"

#include <algorithm>

namespace specdec::detail {

size_t utf8_complete_prefix(std::string_view s) {
    const size_t n = s.size();
    // The last byte that is not a continuation byte (10xxxxxx) decides,
    // if it is one of the last four.
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        const auto c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) {
            continue;
        }
        const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

stop_matcher::stop_matcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

stop_matcher::scan_result stop_matcher::scan(std::string_view text, size_t from) const {
    scan_result r{std::string_view::npos, text.size()};
    for (size_t q = from; q < text.size(); ++q) {
        const std::string_view rest = text.substr(q);
        for (const std::string & stop : stops_) {
            if (rest.starts_with(stop)) {
                r.match = q;
                r.undecided = std::min(r.undecided, q);
                return r;
            }
            if (r.undecided == text.size() && std::string_view(stop).starts_with(rest)) {
                r.undecided = q; // the rest of the text begins this stop string
            }
        }
    }
    return r;
}

std::string_view text_stream::push(std::string_view piece, bool last) {
    if (stopped_) {
        return {};
    }
    text_ += piece;
    size_t end = text_.size();
    if (!stops_->empty()) {
        const stop_matcher::scan_result r = stops_->scan(text_, decided_);
        if (r.match != std::string_view::npos) {
            text_.resize(r.match);
            stopped_ = true;
            return release_to(text_.size());
        }
        decided_ = r.undecided;
        end = r.undecided;
    }
    if (last) {
        return release_to(text_.size());
    }
    return release_to(released_ + utf8_complete_prefix(std::string_view(text_).substr(released_, end - released_)));
}

std::string_view text_stream::finish() {
    return release_to(text_.size());
}

std::string_view text_stream::release_to(size_t end) {
    const std::string_view out = std::string_view(text_).substr(released_, end - released_);
    released_ = end;
    return out;
}

} // namespace specdec::detail
