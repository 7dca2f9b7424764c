// llama.cpp's common library (behind every drafter) logs through its own
// logger, to stdout and stderr, independently of llama_log_set. specdec
// keeps it silent unless the user asks for it.
#pragma once

namespace specdec::detail {

// Silences the common logger once per process, the first time a session is
// created, unless specdec_set_upstream_log_level was called before; later
// calls change nothing, so a level the host sets afterwards stays.
// Thread-safe.
void quiet_upstream_log();

} // namespace specdec::detail
