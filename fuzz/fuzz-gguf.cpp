// GGUF inspection and strategy detection on arbitrary bytes: a typed error
// or a description; never an abort (llama.cpp's own detection asserts on a
// GGUF without a block count).
#include "gguf-inspect.h"

#include "specdec/specdec.hpp"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    try {
        const auto summary = specdec::detail::inspect_bytes(data, size);
        try {
            specdec::detail::detect_strategy(summary, &summary);
        } catch (const specdec::error & e) {
            if (e.code() != SPECDEC_STATUS_MODEL_UNSUPPORTED) {
                std::abort();
            }
        }
        for (int s = 0; s < SPECDEC_STRATEGY_COUNT; ++s) {
            try {
                specdec::detail::check_pair(summary, &summary, static_cast<specdec_strategy>(s));
            } catch (const specdec::error & e) {
                if (e.kind() != SPECDEC_STATUS_KIND_COMPATIBILITY && e.code() != SPECDEC_STATUS_INVALID_ARGUMENT) {
                    std::abort();
                }
            }
        }
    } catch (const specdec::error & e) {
        if (e.code() != SPECDEC_STATUS_MALFORMED_FILE) {
            std::abort();
        }
    }
    return 0;
}
