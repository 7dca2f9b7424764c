// Throwing helpers shared by the library's translation units.
#pragma once

#include "specdec/specdec.hpp"

#include <sstream>
#include <string>
#include <utility>

namespace specdec::detail {

// Concatenates the arguments with operator<<.
template <typename... Args>
std::string concat(Args &&... args) {
    std::ostringstream out;
    (out << ... << std::forward<Args>(args));
    return out.str();
}

template <typename... Args>
[[noreturn]] void fail(specdec_status code, Args &&... args) {
    throw error(code, concat(std::forward<Args>(args)...));
}

// Sets the calling thread's specdec_last_error() message.
void set_last_error(const std::string & message);

} // namespace specdec::detail
