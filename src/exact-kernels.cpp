// Exact kernels: the batch invariance of llama.cpp's CPU backend, which
// patches/0001 adds to the pinned release (see specdec.h).
#include "error.h"
#include "gguf-inspect.h"
#include "specdec/specdec.h"

#include "ggml.h"

#include <algorithm>
#include <array>

#if SPECDEC_HAVE_EXACT_KERNELS
#include "ggml-cpu.h"

namespace {

// A build with AMX (SPECDEC_CPU=native on an AMX host) multiplies one row
// with VNNI and several with AMX tiles, which the patches do not align.
bool has_amx() {
    return ggml_cpu_has_amx_int8() != 0;
}

// Exact kernels are specdec's default, and llama.cpp's switch is off by
// default (its own behaviour, for programs that do not load specdec): turned
// on when the library is loaded, before any context of the process decodes.
[[maybe_unused]] const bool exact_by_default = [] {
    ggml_cpu_set_batch_invariant(!has_amx());
    return true;
}();

} // namespace
#endif

extern "C" specdec_status specdec_set_exact_kernels(bool exact) {
    const char * why = nullptr;
#if SPECDEC_HAVE_EXACT_KERNELS
    if (!exact || !has_amx()) {
        ggml_cpu_set_batch_invariant(exact);
        return SPECDEC_STATUS_OK;
    }
    why = "exact kernels: this build's llama.cpp uses AMX (SPECDEC_CPU=native on an AMX host), whose matrix tiles round "
          "a batch of rows otherwise than its one-row kernel; build with SPECDEC_CPU=avx512 for exact kernels, or run "
          "with --kernels fast";
#else
    if (!exact) {
        return SPECDEC_STATUS_OK;
    }
    why = "exact kernels: this build's llama.cpp lacks patches/0001-batch-invariant-cpu-kernels.patch "
          "(scripts/bootstrap.sh applies it to the tree it fetches; without it, the CLI runs with --kernels fast)";
#endif
    try {
        specdec::detail::set_last_error(why);
    } catch (...) {
        // The status still says what happened.
    }
    return SPECDEC_STATUS_UNAVAILABLE;
}

extern "C" bool specdec_exact_kernels(void) {
#if SPECDEC_HAVE_EXACT_KERNELS
    return ggml_cpu_get_batch_invariant();
#else
    return false;
#endif
}

namespace specdec::detail {

void check_exact(const gguf_summary & model) {
#if !SPECDEC_HAVE_EXACT_KERNELS
    fail(SPECDEC_STATUS_UNAVAILABLE, "not exact: this build's llama.cpp lacks patches/0001-batch-invariant-cpu-kernels.patch");
#else
    if (has_amx()) {
        fail(SPECDEC_STATUS_UNAVAILABLE, "not exact: this build's llama.cpp uses AMX (SPECDEC_CPU=native on an AMX host)");
    }
#if !defined(__x86_64__) && !defined(_M_X64)
    fail(SPECDEC_STATUS_UNAVAILABLE, "not exact: the patches make only llama.cpp's x86 CPU kernels batch-invariant");
#endif
    // Every type llama.cpp's quantizer writes, each checked by the near-tie
    // tier (tests/model/test-near-ties.cpp) on dense, MoE and hybrid targets.
    static constexpr std::array<ggml_type, 25> checked = {
        GGML_TYPE_F32,     GGML_TYPE_F16,    GGML_TYPE_BF16,   GGML_TYPE_Q8_0,  GGML_TYPE_Q4_0,   GGML_TYPE_Q4_1,
        GGML_TYPE_Q5_0,    GGML_TYPE_Q5_1,   GGML_TYPE_Q2_K,   GGML_TYPE_Q3_K,  GGML_TYPE_Q4_K,   GGML_TYPE_Q5_K,
        GGML_TYPE_Q6_K,    GGML_TYPE_IQ1_S,  GGML_TYPE_IQ1_M,  GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S,
        GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,  GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0,  GGML_TYPE_TQ2_0,
        GGML_TYPE_MXFP4,
    };
    for (const int type : model.tensor_types) {
        if (std::find(checked.begin(), checked.end(), static_cast<ggml_type>(type)) == checked.end()) {
            fail(SPECDEC_STATUS_UNAVAILABLE, "not exact: its ", ggml_type_name(static_cast<ggml_type>(type)),
                 " weights are not covered by exact kernels");
        }
    }
#endif
}

} // namespace specdec::detail
