// Exact kernels: the batch invariance of llama.cpp's CPU backend, which
// patches/0001 adds to the pinned release (see specdec.h).
#include "error.h"
#include "specdec/specdec.h"

#if SPECDEC_HAVE_EXACT_KERNELS
#include "ggml-cpu.h"

namespace {

// Exact kernels are specdec's default, and llama.cpp's switch is off by
// default (its own behaviour, for programs that do not load specdec): turned
// on when the library is loaded, before any context of the process decodes.
[[maybe_unused]] const bool exact_by_default = [] {
    ggml_cpu_set_batch_invariant(true);
    return true;
}();

} // namespace
#endif

extern "C" specdec_status specdec_set_exact_kernels(bool exact) {
#if SPECDEC_HAVE_EXACT_KERNELS
    ggml_cpu_set_batch_invariant(exact);
#else
    if (exact) {
        try {
            specdec::detail::set_last_error("exact kernels: this build's llama.cpp lacks patches/0001-batch-invariant-cpu-kernels.patch "
                                            "(scripts/bootstrap.sh applies it to the tree it fetches; without it, "
                                            "the CLI runs with --kernels fast)");
        } catch (...) {
            // The status still says what happened.
        }
        return SPECDEC_STATUS_UNAVAILABLE;
    }
#endif
    return SPECDEC_STATUS_OK;
}

extern "C" bool specdec_exact_kernels(void) {
#if SPECDEC_HAVE_EXACT_KERNELS
    return ggml_cpu_get_batch_invariant();
#else
    return false;
#endif
}
