// The session checkpoint format: a versioned little-endian blob.
//
//   offset size field
//   0      8    magic "SPDCSTAT"
//   8      4    u32 format version (state_format_version)
//   12     4    u32 strategy (specdec_strategy)
//   16     4    u32 n_seq
//   20     4    i32 n_draft_max
//   24     4    i32 n_draft_min
//   28     4    f32 p_min (IEEE-754 bits)
//   32     4    i32 sequence id
//   36     8    u64 n_history, then n_history x i32 tokens
//   ...    8    u64 n_impl,    then n_impl bytes of drafter state
// Nothing may follow; the whole blob is at most SPECDEC_MAX_STATE_BYTES.
#pragma once

#include "specdec/specdec.h"

#include "error.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace specdec::detail {

// Little-endian bytes out, and back in with bounds checks: a read past the
// end throws error(STATE_MALFORMED) naming the field. Every blob the library
// writes (session checkpoints, saved sequences, slot files) opens with an
// 8-byte magic and a u32 format version (header), and carries its
// variable-length parts as a u64 size and that many bytes (sized).
class byte_writer {
public:
    void bytes(const void * data, size_t n) {
        const auto * p = static_cast<const uint8_t *>(data);
        out_.insert(out_.end(), p, p + n);
    }
    void u32(uint32_t v) { put(v, 4); }
    void u64(uint64_t v) { put(v, 8); }
    void header(const char (&magic)[8], uint32_t version) {
        bytes(magic, sizeof(magic));
        u32(version);
    }
    void sized(std::span<const uint8_t> data) {
        u64(data.size());
        bytes(data.data(), data.size());
    }
    std::vector<uint8_t> take() { return std::move(out_); }

private:
    void put(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) {
            out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
        }
    }

    std::vector<uint8_t> out_;
};

class byte_reader {
public:
    explicit byte_reader(std::span<const uint8_t> in) : in_(in) {}

    size_t remaining() const { return in_.size() - pos_; }

    uint32_t u32(const char * field) { return static_cast<uint32_t>(get(4, field)); }
    uint64_t u64(const char * field) { return get(8, field); }
    std::span<const uint8_t> bytes(size_t n, const char * field) {
        need(n, field);
        std::span<const uint8_t> s = in_.subspan(pos_, n);
        pos_ += n;
        return s;
    }
    // byte_writer::header's: throws error(STATE_MALFORMED) for another
    // magic, error(STATE_VERSION) for another version; `what` names the blob.
    void header(const char (&magic)[8], uint32_t version, const char * what) {
        const std::span<const uint8_t> m = bytes(sizeof(magic), "magic");
        if (!std::equal(m.begin(), m.end(), magic)) {
            fail(SPECDEC_STATUS_STATE_MALFORMED, "not a ", what, " (bad magic)");
        }
        if (const uint32_t v = u32("version"); v != version) {
            fail(SPECDEC_STATUS_STATE_VERSION, what, " has format version ", v, "; this library reads version ", version);
        }
    }
    // byte_writer::sized's bytes; `field` names them.
    std::span<const uint8_t> sized(const char * field) {
        const uint64_t n = u64(field);
        need(n, field);
        return bytes(static_cast<size_t>(n), field);
    }

private:
    uint64_t get(int n, const char * field) {
        need(static_cast<uint64_t>(n), field);
        uint64_t v = 0;
        for (int i = 0; i < n; ++i) {
            v |= static_cast<uint64_t>(in_[pos_++]) << (8 * i);
        }
        return v;
    }
    void need(uint64_t n, const char * field) const {
        if (remaining() < n) {
            fail(SPECDEC_STATUS_STATE_MALFORMED, "blob is truncated: ", field, " needs ", n, " bytes at offset ", pos_, ", ",
                 remaining(), " remain");
        }
    }

    std::span<const uint8_t> in_;
    size_t pos_ = 0;
};

constexpr uint32_t state_format_version = 1;

struct session_state {
    specdec_session_params   params{};
    llama_seq_id             seq_id = 0;
    std::vector<llama_token> history;
    std::vector<uint8_t>     impl; // the drafter's own bytes (may be empty)
};

// Throws error(STATE_TOO_LARGE) if the blob would exceed the bound.
std::vector<uint8_t> encode_state(const session_state & state);

// Parses and validates every field against the session that restores it:
// its parameters, the sequence id (expected_seq; -1: any, for a drafter
// whose state may move between sequences) and the vocabulary size. Throws
// the STATE_* status of the first problem; returns the decoded state otherwise.
session_state decode_state(std::span<const uint8_t> blob, const specdec_session_params & expected,
                           llama_seq_id expected_seq, int32_t n_vocab);

} // namespace specdec::detail
