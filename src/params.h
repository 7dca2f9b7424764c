// Session parameters: defaults and validation, in one place.
#pragma once

#include "specdec/specdec.h"

namespace specdec::detail {

// Throws error(INVALID_CONFIG) naming the first field out of range.
void validate_params(const specdec_session_params & params);

} // namespace specdec::detail
