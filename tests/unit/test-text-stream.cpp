// The text side of a sequence without the loop: complete UTF-8 prefixes,
// the earliest stop string, and what a stream may release when.
#include "text-stream.h"

#include <gtest/gtest.h>

namespace specdec::test {
namespace {

using detail::stop_matcher;
using detail::text_stream;
using detail::utf8_complete_prefix;

TEST(TextStream, Utf8PrefixEndsBeforeAnIncompleteCharacter) {
    EXPECT_EQ(utf8_complete_prefix(""), 0u);
    EXPECT_EQ(utf8_complete_prefix("ab"), 2u);
    EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);              // first byte of "é"
    EXPECT_EQ(utf8_complete_prefix("a\xC3\xA9"), 3u);          // "é" whole
    EXPECT_EQ(utf8_complete_prefix("a\xE2\x82"), 1u);          // two of the three bytes of "€"
    EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);       // three of the four bytes of an emoji
    EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98\x80"), 4u);
    EXPECT_EQ(utf8_complete_prefix("a\x80\x80"), 3u);          // stray continuation bytes: nothing to wait for
    EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);              // never valid: not held
    EXPECT_EQ(utf8_complete_prefix(std::string("\0\xC3", 2)), 1u);
}

TEST(TextStream, TheEarliestCompleteStopStringWins) {
    const stop_matcher m({"abcd", "bc", "zz"});
    // "bc" is complete at 1; "abcd" could still start at 0, but a stop string
    // that is there now wins over one that might come.
    EXPECT_EQ(m.scan("xabc", 0).match, 2u);
    const auto r = m.scan("xab", 0);
    EXPECT_EQ(r.match, std::string_view::npos);
    EXPECT_EQ(r.undecided, 1u); // "ab" may begin "abcd"
    EXPECT_EQ(m.scan("xyz", 0).undecided, 2u);
    EXPECT_EQ(m.scan("xyz", 0).match, std::string_view::npos);
}

TEST(TextStream, HoldsWhatMayBeAStopStringAndReleasesTheRest) {
    const stop_matcher m({"END"});
    text_stream s(m);
    EXPECT_EQ(s.push("hello E"), "hello ");
    EXPECT_EQ(s.held(), 1u);
    EXPECT_EQ(s.push("N"), "");
    EXPECT_EQ(s.push("x"), "ENx"); // not a stop string after all
    EXPECT_EQ(s.push(" E"), " ");
    EXPECT_EQ(s.push("ND and more"), "");
    EXPECT_TRUE(s.stopped());
    EXPECT_EQ(s.text(), "hello ENx ");
    EXPECT_EQ(s.push("later"), "");
    EXPECT_EQ(s.text(), "hello ENx ");
}

TEST(TextStream, FinishAndLastReleaseEverything) {
    const stop_matcher m({"END"});
    text_stream s(m);
    EXPECT_EQ(s.push("a\xE2\x82"), "a");
    EXPECT_EQ(s.push("\xAC" "E"), "\xE2\x82\xAC");
    EXPECT_EQ(s.finish(), "E");
    EXPECT_EQ(s.held(), 0u);

    text_stream t(m);
    EXPECT_EQ(t.push("xE\xC3", true), "xE\xC3"); // the sequence ends here
    EXPECT_FALSE(t.stopped());
}

TEST(TextStream, WithoutStopStringsOnlyUtf8IsHeld) {
    const stop_matcher none({});
    text_stream s(none);
    EXPECT_EQ(s.push(std::string("a\0b", 3)), std::string("a\0b", 3));
    EXPECT_EQ(s.push("\xF0\x9F"), "");
    EXPECT_EQ(s.push("\x98\x80!"), "\xF0\x9F\x98\x80!");
    EXPECT_EQ(s.take_text(), std::string("a\0b\xF0\x9F\x98\x80!", 8));
}

} // namespace
} // namespace specdec::test
