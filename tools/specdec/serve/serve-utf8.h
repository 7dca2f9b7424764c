// `specdec serve`'s one UTF-8 decoder: the code point at a byte offset,
// shortest forms only, and whether a whole text is well-formed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace cli::serve {

// The code point that starts at s[i] and its length in bytes; nullopt where
// no well-formed, shortest-form UTF-8 character starts (i < s.size()).
inline std::optional<std::pair<uint32_t, size_t>> utf8_code_point(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
    const uint8_t lead = b(0);
    const size_t n = lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
        return std::nullopt;
    }
    uint32_t c = n == 1 ? lead : lead & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
        if ((b(k) & 0xC0) != 0x80) {
            return std::nullopt;
        }
        c = (c << 6) | (b(k) & 0x3F);
    }
    constexpr uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[n]) {
        return std::nullopt; // an overlong form
    }
    return std::make_pair(c, n);
}

inline bool valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = utf8_code_point(s, i);
        if (!c) {
            return false;
        }
        i += c->second;
    }
    return true;
}

} // namespace cli::serve
