// `specdec serve`, llama-server's slot files: POST /slots/{id}?action=save,
// restore or erase, with --slot-save-path DIR. A slot's state (the tokens
// it holds and both contexts' cells there, as the prompt cache saves them)
// goes to a file in DIR and back, so that a long prompt decoded once is
// reused after a restart; the engine does the work on its own thread
// (scheduler::call). Files are named by the client, checked, and never
// leave DIR.
#pragma once

#include "serve-openai.h"
#include "serve-routes.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace cli::serve {

// Whether `name` may name a file in the slot folder, by llama-server's
// rules: 1 to 255 bytes of well-formed UTF-8 (no overlong forms), no
// control character, no path separator (/ \), none of : * ? " < > |, no
// look-alikes of them (U+FF0E, U+2215, U+2216), no surrogate, U+FFFD or
// BOM, no leading or trailing space, no trailing '.', no "..", not ".".
bool valid_slot_filename(std::string_view name);

// The answer to POST /slots/{id}?action=... (`id` as the path gives it,
// `query` the target's part after '?', `body` JSON with `filename` for save
// and restore), in llama-server's shapes:
//   save:    {id_slot, filename, n_saved (tokens), n_written (bytes), timings: {save_ms}}
//   restore: {id_slot, filename, n_restored (tokens), n_read (bytes), timings: {restore_ms}}
//   erase:   {id_slot, n_erased (tokens)}
// Throws api_error: 400 for a bad id, action or filename, a slot that holds
// a running request, a file that is not a slot file or was written for
// another target model or drafter; 404 for a file to restore that does not
// exist; 500 when the file cannot be written or read. `folder` ends with '/'.
nlohmann::json slot_action_answer(const service & svc, const std::string & folder, std::string_view id, std::string_view query,
                                  std::string_view body, const request_limits & limits);

} // namespace cli::serve
