// The checkpoint blob: round trip, and a typed rejection for every defect.
#include "state-codec.h"

#include "specdec/specdec.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>

namespace {

using specdec::detail::decode_state;
using specdec::detail::encode_state;
using specdec::detail::session_state;

constexpr int32_t n_vocab = 128;

specdec_session_params params() {
    specdec_session_params p = specdec_session_default_params();
    p.strategy = SPECDEC_STRATEGY_EAGLE3;
    p.n_seq = 4;
    p.n_draft_max = 5;
    p.n_draft_min = 1;
    p.p_min = 0.25f;
    return p;
}

session_state sample() {
    session_state s;
    s.params = params();
    s.seq_id = 2;
    s.history = {3, 4, 5, 127, 0};
    s.impl = {0xde, 0xad, 0xbe, 0xef, 0x01};
    return s;
}

specdec_status decode_status(std::span<const uint8_t> blob, specdec_session_params p = params(), llama_seq_id seq = 2) {
    try {
        decode_state(blob, p, seq, n_vocab);
        return SPECDEC_STATUS_OK;
    } catch (const specdec::error & e) {
        EXPECT_GT(std::strlen(e.what()), 10u);
        return e.code();
    }
}

void put_u32(std::vector<uint8_t> & b, size_t off, uint32_t v) {
    for (int i = 0; i < 4; ++i) {
        b[off + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
    }
}

TEST(StateCodec, RoundTripsEveryField) {
    const session_state in = sample();
    const std::vector<uint8_t> blob = encode_state(in);
    const session_state out = decode_state(blob, params(), 2, n_vocab);
    EXPECT_EQ(out.seq_id, in.seq_id);
    EXPECT_EQ(out.history, in.history);
    EXPECT_EQ(out.impl, in.impl);
    EXPECT_EQ(out.params.n_draft_max, in.params.n_draft_max);
    EXPECT_EQ(blob.size(), 36u + 8 + 4 * in.history.size() + 8 + in.impl.size());
}

TEST(StateCodec, IsLittleEndianWithMagicFirst) {
    const std::vector<uint8_t> blob = encode_state(sample());
    EXPECT_EQ(std::memcmp(blob.data(), "SPDCSTAT", 8), 0);
    EXPECT_EQ(blob[8], 1); // version 1, least significant byte first
    EXPECT_EQ(blob[9], 0);
    EXPECT_EQ(blob[12], static_cast<uint8_t>(SPECDEC_STRATEGY_EAGLE3));
    EXPECT_EQ(blob[32], 2); // sequence id
}

TEST(StateCodec, EmptyHistoryAndImplRoundTrip) {
    session_state in = sample();
    in.history.clear();
    in.impl.clear();
    const session_state out = decode_state(encode_state(in), params(), 2, n_vocab);
    EXPECT_TRUE(out.history.empty());
    EXPECT_TRUE(out.impl.empty());
}

TEST(StateCodec, EveryTruncationIsMalformed) {
    const std::vector<uint8_t> blob = encode_state(sample());
    for (size_t n = 0; n < blob.size(); ++n) {
        EXPECT_EQ(decode_status({blob.data(), n}), SPECDEC_STATUS_STATE_MALFORMED) << "length " << n;
    }
}

TEST(StateCodec, TrailingBytesAreMalformed) {
    std::vector<uint8_t> blob = encode_state(sample());
    blob.push_back(0);
    EXPECT_EQ(decode_status(blob), SPECDEC_STATUS_STATE_MALFORMED);
}

TEST(StateCodec, BadMagicIsMalformed) {
    std::vector<uint8_t> blob = encode_state(sample());
    blob[0] = 'X';
    EXPECT_EQ(decode_status(blob), SPECDEC_STATUS_STATE_MALFORMED);
}

TEST(StateCodec, OtherVersionIsRejected) {
    std::vector<uint8_t> blob = encode_state(sample());
    put_u32(blob, 8, 2);
    EXPECT_EQ(decode_status(blob), SPECDEC_STATUS_STATE_VERSION);
}

TEST(StateCodec, OtherStrategyIsRejected) {
    std::vector<uint8_t> blob = encode_state(sample());
    put_u32(blob, 12, SPECDEC_STRATEGY_MTP);
    EXPECT_EQ(decode_status(blob), SPECDEC_STATUS_STATE_STRATEGY);
    put_u32(blob, 12, 77); // not a strategy at all
    EXPECT_EQ(decode_status(blob), SPECDEC_STATUS_STATE_STRATEGY);
}

TEST(StateCodec, EveryConfigurationFieldIsChecked) {
    const std::vector<uint8_t> blob = encode_state(sample());
    for (size_t off : {16u, 20u, 24u, 28u}) {
        std::vector<uint8_t> b = blob;
        b[off] ^= 1;
        EXPECT_EQ(decode_status(b), SPECDEC_STATUS_STATE_CONFIG) << "offset " << off;
    }
    specdec_session_params other = params();
    other.p_min = 0.5f;
    EXPECT_EQ(decode_status(blob, other), SPECDEC_STATUS_STATE_CONFIG);
}

TEST(StateCodec, OtherSequenceIsRejectedUnlessAnyIsExpected) {
    const std::vector<uint8_t> blob = encode_state(sample());
    EXPECT_EQ(decode_status(blob, params(), 1), SPECDEC_STATUS_STATE_SEQUENCE);
    EXPECT_EQ(decode_state(blob, params(), -1, n_vocab).seq_id, sample().seq_id);
}

TEST(StateCodec, TokensOutsideTheVocabularyAreMalformed) {
    session_state s = sample();
    s.history.back() = n_vocab;
    EXPECT_EQ(decode_status(encode_state(s)), SPECDEC_STATUS_STATE_MALFORMED);
    s.history.back() = -1;
    EXPECT_EQ(decode_status(encode_state(s)), SPECDEC_STATUS_STATE_MALFORMED);
}

TEST(StateCodec, LyingLengthsAreMalformed) {
    std::vector<uint8_t> blob = encode_state(sample());
    put_u32(blob, 36, 0xffffffffu); // history length far beyond the blob
    EXPECT_EQ(decode_status(blob), SPECDEC_STATUS_STATE_MALFORMED);
    blob = encode_state(sample());
    const size_t impl_len_off = 36 + 8 + 4 * sample().history.size();
    put_u32(blob, impl_len_off, 4); // claims fewer drafter bytes than follow
    EXPECT_EQ(decode_status(blob), SPECDEC_STATUS_STATE_MALFORMED);
}

TEST(StateCodec, OversizedBlobsAreRejectedBothWays) {
    std::vector<uint8_t> huge(static_cast<size_t>(SPECDEC_MAX_STATE_BYTES) + 1, 0);
    EXPECT_EQ(decode_status(huge), SPECDEC_STATUS_STATE_TOO_LARGE);
    session_state s = sample();
    s.impl.assign(SPECDEC_MAX_STATE_BYTES, 0);
    try {
        encode_state(s);
        FAIL() << "encoding an oversized state must throw";
    } catch (const specdec::error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_STATE_TOO_LARGE);
    }
}

} // namespace
