#include "progress-line.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include <sys/ioctl.h>
#include <unistd.h>

namespace cli {

progress_line::progress_line(std::string prefix, bool quiet)
    : prefix_(std::move(prefix)), quiet_(quiet), live_(!quiet && isatty(STDERR_FILENO) == 1) {}

progress_line::~progress_line() {
    clear();
}

void progress_line::step(const std::string & text) {
    if (quiet_) {
        return;
    }
    if (live_) {
        draw(text);
        return;
    }
    std::fprintf(stderr, "%s: %s\n", prefix_.c_str(), text.c_str());
    std::fflush(stderr);
    printed_ = std::chrono::steady_clock::now();
}

void progress_line::update(const std::string & text) {
    if (quiet_) {
        return;
    }
    const auto since = std::chrono::steady_clock::now() - printed_;
    if (live_ ? since >= std::chrono::milliseconds(100) : since >= std::chrono::seconds(20)) {
        step(text);
    }
}

void progress_line::draw(const std::string & text) {
    std::string line = prefix_ + ": " + text;
    // A line wider than the terminal would wrap, and \r would return only to its last row.
    winsize ws{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col) {
        line.resize(ws.ws_col - 1);
    }
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    shown_ = true;
    printed_ = std::chrono::steady_clock::now();
}

void progress_line::stage(const std::string & name, uint32_t done, uint32_t total, const char * unit) {
    const std::string text = total > 0 ? name + ": " + std::to_string(done) + "/" + std::to_string(total) + " " + unit : name;
    const uint32_t tenth = total > 0 ? static_cast<uint32_t>(uint64_t{done} * 10 / total) : 0;
    if (name != stage_ || tenth > tenth_) {
        stage_ = name;
        tenth_ = tenth;
        step(text);
    } else {
        update(text);
    }
}

void progress_line::clear() {
    if (shown_) {
        std::fputs("\r\033[K", stderr);
        std::fflush(stderr);
        shown_ = false;
    }
}

std::string format_duration(double seconds) {
    const long s = std::lround(std::max(0.0, seconds));
    char buf[32];
    if (s < 60) {
        std::snprintf(buf, sizeof buf, "%ld s", s);
    } else if (s < 3600) {
        std::snprintf(buf, sizeof buf, "%ld min %02ld s", s / 60, s % 60);
    } else {
        std::snprintf(buf, sizeof buf, "%ld h %02ld min", s / 3600, s % 3600 / 60);
    }
    return buf;
}

} // namespace cli
