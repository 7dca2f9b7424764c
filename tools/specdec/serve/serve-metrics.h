// `specdec serve`, GET /metrics: counters, gauges and histograms in the
// Prometheus text format (version 0.0.4). llama-server's names are kept,
// with its `llamacpp:` prefix and meanings, so its dashboards work; what it
// has no name for is under `specdec:`.
#pragma once

#include "specdec/specdec.hpp"

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace cli::serve {

// A cumulative histogram over fixed upper bounds (seconds), as Prometheus
// renders it: _bucket{le=...} for each bound and +Inf, _sum, _count.
// Not thread-safe (metrics guards it).
class histogram {
public:
    explicit histogram(std::vector<double> upper_bounds); // ascending
    void observe(double value);
    // Appends # HELP, # TYPE and the series of `name`.
    void render(std::string & out, const std::string & name, const std::string & help) const;

private:
    std::vector<double>   bounds_;
    std::vector<uint64_t> counts_; // per bucket, not cumulative; one more for +Inf
    double                sum_ = 0;
    uint64_t              count_ = 0;
};

// What one finished request adds to the metrics.
struct request_metrics {
    size_t                 n_prompt = 0;        // its prompt's tokens
    size_t                 n_prompt_cached = 0; // of which reused from its slot, not decoded
    specdec_stop_reason    stop = SPECDEC_STOP_BUDGET;
    bool                   rejection = false; // its drafts were decided by speculative sampling (SPECDEC_ACCEPT_REJECTION, sampled)
    specdec_sequence_stats stats{};
    double                 ttft_s = -1;    // time to first token; < 0: no token was emitted
    double                 itl_s = -1;     // mean time between its tokens after the first; < 0: fewer than 2
    // Seconds from its arrival at the engine to its first token (its
    // prompt's, the wait for a slot included), then to its last (the other
    // tokens'), as its native answer's timings.
    double                 prompt_s = 0;
    double                 predicted_s = 0;
    size_t                 n_predicted = 0; // tokens it generated
};

// The server's metrics. Every member is thread-safe.
class metrics {
public:
    metrics();

    // The engine thread, as requests come and go.
    // Requests in slots being decoded, waiting for one, and paused (their
    // clients not reading: see scheduler::pause), each counted once.
    void set_load(size_t running, size_t waiting, size_t paused);
    // What the prompt cache (--cache-ram) holds.
    void set_prompt_cache(size_t n_sequences, size_t n_bytes);
    void add_generated(uint64_t n_tokens);
    void add_finished(const request_metrics & r);
    // An engine step (one forward pass of the target) with `busy` requests in slots.
    void add_step(size_t busy);
    // HTTP threads: a request refused with 503 (queue full or shutting down).
    void add_rejected();

    // The Prometheus text of every metric.
    std::string render() const;
    // When the server started, in seconds since the Unix epoch (llama-server's
    // Process-Start-Time-Unix header of /metrics).
    int64_t start_time_unix() const { return start_unix_; }

private:
    mutable std::mutex m_;
    const int64_t start_unix_;
    uint64_t n_prompt_ = 0;        // decoded
    uint64_t n_prompt_cached_ = 0; // reused
    uint64_t n_rejection_ = 0;     // finished requests decided by speculative sampling
    uint64_t n_generated_ = 0;
    double   prompt_s_ = 0, predicted_s_ = 0; // finished requests' (request_metrics)
    uint64_t n_predicted_finished_ = 0;       // their generated tokens, over predicted_s_
    uint64_t n_steps_ = 0, n_busy_ = 0;       // engine steps, and the requests in slots summed over them
    size_t   n_tokens_max_ = 0;               // the longest finished request's prompt + output
    uint64_t n_drafted_ = 0;
    uint64_t n_accepted_ = 0;
    uint64_t n_drafts_ = 0;                                  // verified non-empty proposals
    std::array<uint64_t, SPECDEC_MAX_DRAFT> drafts_at_{};    // proposals with a token at position i
    std::array<uint64_t, SPECDEC_MAX_DRAFT> accepted_at_{};  // proposals whose token i was kept
    size_t   n_pos_ = 0;                                     // positions seen (the longest proposal)
    uint64_t n_stop_ = 0, n_length_ = 0, n_cancelled_ = 0, n_error_ = 0, n_rejected_ = 0;
    size_t   running_ = 0, waiting_ = 0, paused_ = 0;
    size_t   cached_sequences_ = 0, cached_bytes_ = 0;
    histogram ttft_;
    histogram itl_;
};

} // namespace cli::serve
