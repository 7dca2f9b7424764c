// Restoring speculative state from arbitrary bytes: a typed error or a blob
// that re-encodes to exactly the same bytes; never a crash.
#include "state-codec.h"

#include "specdec/specdec.hpp"

#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    specdec_session_params params = specdec_session_default_params();
    params.strategy = SPECDEC_STRATEGY_EAGLE3;
    params.n_seq = 4;
    params.n_draft_max = 5;
    params.n_draft_min = 1;
    params.p_min = 0.25f;
    try {
        const auto state = specdec::detail::decode_state({data, size}, params, 2, 128);
        const auto again = specdec::detail::encode_state(state);
        if (again.size() != size || std::memcmp(again.data(), data, size) != 0) {
            std::abort(); // an accepted blob must be canonical
        }
    } catch (const specdec::error & e) {
        const specdec_status_kind kind = e.kind();
        if (kind != SPECDEC_STATUS_KIND_STATE) {
            std::abort(); // only state errors are possible here
        }
    }
    return 0;
}
