#include "upstream-log.h"

#include "specdec/specdec.h"

#include "log.h"

#include <atomic>

namespace specdec::detail {

static std::atomic<bool> user_level_set{false};

void quiet_upstream_log() {
    if (!user_level_set.load()) {
        common_log_set_verbosity_thold(-1);
    }
}

} // namespace specdec::detail

extern "C" void specdec_set_upstream_log_level(int level) {
    specdec::detail::user_level_set.store(true);
    common_log_set_verbosity_thold(level);
}
