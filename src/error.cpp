#include "error.h"

#include <cstring>

namespace specdec {

error::error(specdec_status code, const std::string & message)
    : std::runtime_error(message), code_(code) {}

generation_error::generation_error(specdec_status code, const std::string & message, generation_result partial)
    : error(code, message), partial_(std::make_shared<const generation_result>(std::move(partial))) {}

namespace detail {

static thread_local std::string last_error;

void set_last_error(const std::string & message) {
    last_error = message;
}

} // namespace detail
} // namespace specdec

extern "C" {

const char * specdec_last_error(void) {
    return specdec::detail::last_error.c_str();
}

specdec_status_kind specdec_status_kind_of(specdec_status status) {
    const int value = static_cast<int>(status);
    if (value == 0 || std::strcmp(specdec_status_name(status), "UNKNOWN") == 0) {
        return SPECDEC_STATUS_KIND_NONE;
    }
    switch (value / 100) {
        case 1: return SPECDEC_STATUS_KIND_CONFIGURATION;
        case 2: return SPECDEC_STATUS_KIND_LIFECYCLE;
        case 3: return SPECDEC_STATUS_KIND_COMPATIBILITY;
        case 4: return SPECDEC_STATUS_KIND_STATE;
        case 5: return SPECDEC_STATUS_KIND_NATIVE;
        default: return SPECDEC_STATUS_KIND_NONE;
    }
}

const char * specdec_status_name(specdec_status status) {
    switch (status) {
        case SPECDEC_STATUS_OK:                 return "OK";
        case SPECDEC_STATUS_INVALID_ARGUMENT:   return "INVALID_ARGUMENT";
        case SPECDEC_STATUS_INVALID_CONFIG:     return "INVALID_CONFIG";
        case SPECDEC_STATUS_UNREPRESENTABLE_TEXT: return "UNREPRESENTABLE_TEXT";
        case SPECDEC_STATUS_BUFFER_TOO_SMALL:   return "BUFFER_TOO_SMALL";
        case SPECDEC_STATUS_BAD_SEQ_ID:         return "BAD_SEQ_ID";
        case SPECDEC_STATUS_PROPOSAL_PENDING:   return "PROPOSAL_PENDING";
        case SPECDEC_STATUS_NO_PROPOSAL:        return "NO_PROPOSAL";
        case SPECDEC_STATUS_ACCEPTED_TOO_MANY:  return "ACCEPTED_TOO_MANY";
        case SPECDEC_STATUS_PROMPT_TOO_LONG:    return "PROMPT_TOO_LONG";
        case SPECDEC_STATUS_POSITION_MISMATCH:  return "POSITION_MISMATCH";
        case SPECDEC_STATUS_CONTEXT_FULL:       return "CONTEXT_FULL";
        case SPECDEC_STATUS_QUEUE_FULL:         return "QUEUE_FULL";
        case SPECDEC_STATUS_UNKNOWN_REQUEST:    return "UNKNOWN_REQUEST";
        case SPECDEC_STATUS_WRONG_CONTEXT_TYPE: return "WRONG_CONTEXT_TYPE";
        case SPECDEC_STATUS_SEQ_CAPACITY:       return "SEQ_CAPACITY";
        case SPECDEC_STATUS_BATCH_CAPACITY:     return "BATCH_CAPACITY";
        case SPECDEC_STATUS_RECURRENT_SLOTS:    return "RECURRENT_SLOTS";
        case SPECDEC_STATUS_WIDTH_MISMATCH:     return "WIDTH_MISMATCH";
        case SPECDEC_STATUS_LAYER_MISMATCH:     return "LAYER_MISMATCH";
        case SPECDEC_STATUS_VOCAB_MISMATCH:     return "VOCAB_MISMATCH";
        case SPECDEC_STATUS_MODEL_UNSUPPORTED:  return "MODEL_UNSUPPORTED";
        case SPECDEC_STATUS_UNAVAILABLE:        return "UNAVAILABLE";
        case SPECDEC_STATUS_STATE_MALFORMED:    return "STATE_MALFORMED";
        case SPECDEC_STATUS_STATE_TOO_LARGE:    return "STATE_TOO_LARGE";
        case SPECDEC_STATUS_STATE_VERSION:      return "STATE_VERSION";
        case SPECDEC_STATUS_STATE_STRATEGY:     return "STATE_STRATEGY";
        case SPECDEC_STATUS_STATE_CONFIG:       return "STATE_CONFIG";
        case SPECDEC_STATUS_STATE_SEQUENCE:     return "STATE_SEQUENCE";
        case SPECDEC_STATUS_DECODE_FAILED:      return "DECODE_FAILED";
        case SPECDEC_STATUS_NATIVE_FAILURE:     return "NATIVE_FAILURE";
        case SPECDEC_STATUS_IO_ERROR:           return "IO_ERROR";
        case SPECDEC_STATUS_OUT_OF_MEMORY:      return "OUT_OF_MEMORY";
        case SPECDEC_STATUS_MALFORMED_FILE:     return "MALFORMED_FILE";
        case SPECDEC_STATUS_MAX_ENUM:           break;
    }
    return "UNKNOWN";
}

} // extern "C"
