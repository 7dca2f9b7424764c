// Linked into specdec-upstream-reference only.
//
// llama.cpp's common logger writes from a worker thread and is never torn
// down, so lines queued just before main() returns can be lost. The decode
// speed that `specdec bench --upstream` parses is one of the last lines
// upstream's loop prints; under load it went missing now and then. Pausing
// the logger joins its worker, which writes every queued line first; doing
// it from an exit handler makes the reference's output complete.

#include "log.h"

#include <cstdlib>

namespace {

struct flush_log_at_exit {
    flush_log_at_exit() {
        common_log_main();  // create the logger before the handler is registered
        std::atexit([] { common_log_pause(common_log_main()); });
    }
};

const flush_log_at_exit flush_at_exit;

}  // namespace
