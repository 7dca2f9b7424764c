// Progress of long work on stderr, for the command-line tools (the libraries
// never print: they report through callbacks). On a terminal one line is
// rewritten in place (at most ten times a second); anywhere else (a pipe, a
// log file) every step gets a plain line of its own, so that a log shows
// what ran and when, and a long step a line at least every 20 s. Quiet:
// nothing at all.
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <string>

namespace cli {

class progress_line {
public:
    // Lines read "`prefix`: text". Live when stderr is a terminal; silent when `quiet`.
    progress_line(std::string prefix, bool quiet);
    // Clears a live line.
    ~progress_line();
    progress_line(const progress_line &) = delete;
    progress_line & operator=(const progress_line &) = delete;

    // A new step: replaces the live line, or is printed as a line of its own.
    void step(const std::string & text);
    // Within the current step (a count moving on): replaces the live line;
    // off a terminal printed only when nothing was for 20 s. Cheap enough
    // to call for every token.
    void update(const std::string & text);
    // A counted stage ("quantizing: 12/311 tensors" with unit "tensors";
    // total 0: not counted): a step when the stage begins and at every
    // further tenth of it, so that a log gets about ten lines a stage; an
    // update in between.
    void stage(const std::string & name, uint32_t done, uint32_t total, const char * unit);
    // Removes the live line (no-op otherwise), so that other output starts on a clean line.
    void clear();

    bool live() const { return live_; }

private:
    void draw(const std::string & text);

    std::string prefix_;
    bool        quiet_;
    bool        live_;
    bool        shown_ = false; // a live line is on screen
    std::chrono::steady_clock::time_point printed_{}; // when a line was last drawn or printed
    std::string stage_;         // the stage last shown by stage()
    uint32_t    tenth_ = 0;     // how many tenths of it were shown as steps
};

// A duration for a progress line: "8 s", "3 min 05 s", "1 h 02 min".
std::string format_duration(double seconds);

} // namespace cli
