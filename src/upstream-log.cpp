#include "upstream-log.h"

#include "specdec/specdec.h"

#include "log.h"

#include <mutex>

namespace specdec::detail {

namespace {

// common_log_set_verbosity_thold writes a plain global: every write goes
// through this mutex, and specdec writes it at most once on its own.
std::mutex level_mutex;
bool       level_chosen = false; // by specdec_set_upstream_log_level or by the first session

} // namespace

void quiet_upstream_log() {
    const std::lock_guard<std::mutex> lock(level_mutex);
    if (!level_chosen) {
        level_chosen = true;
        common_log_set_verbosity_thold(-1);
    }
}

} // namespace specdec::detail

extern "C" void specdec_set_upstream_log_level(int level) {
    const std::lock_guard<std::mutex> lock(specdec::detail::level_mutex);
    specdec::detail::level_chosen = true;
    common_log_set_verbosity_thold(level);
}
