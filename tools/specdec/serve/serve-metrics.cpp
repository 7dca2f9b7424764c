#include "serve-metrics.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace cli::serve {

namespace {

// The shortest text that reads back as `v` (0.005, not 0.0050000000000000001).
std::string number(double v) {
    char buf[64];
    for (int precision = 6; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
        if (std::strtod(buf, nullptr) == v) {
            break;
        }
    }
    return buf;
}

void header(std::string & out, const std::string & name, const char * type, const std::string & help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void scalar(std::string & out, const std::string & name, const char * type, const std::string & help, double v) {
    header(out, name, type, help);
    out += name + " " + number(v) + "\n";
}

} // namespace

histogram::histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void histogram::observe(double value) {
    const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value); // first bound >= value: le is inclusive
    ++counts_[static_cast<size_t>(it - bounds_.begin())];
    sum_ += value;
    ++count_;
}

void histogram::render(std::string & out, const std::string & name, const std::string & help) const {
    header(out, name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    cumulative += counts_.back();
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
    out += name + "_sum " + number(sum_) + "\n";
    out += name + "_count " + std::to_string(count_) + "\n";
}

metrics::metrics()
    : start_unix_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      ttft_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void metrics::set_load(size_t running, size_t waiting, size_t paused) {
    std::lock_guard<std::mutex> lock(m_);
    running_ = running;
    waiting_ = waiting;
    paused_ = paused;
}

void metrics::set_prompt_cache(size_t n_sequences, size_t n_bytes) {
    std::lock_guard<std::mutex> lock(m_);
    cached_sequences_ = n_sequences;
    cached_bytes_ = n_bytes;
}

void metrics::add_generated(uint64_t n_tokens) {
    std::lock_guard<std::mutex> lock(m_);
    n_generated_ += n_tokens;
}

void metrics::add_step(size_t busy) {
    std::lock_guard<std::mutex> lock(m_);
    ++n_steps_;
    n_busy_ += busy;
}

void metrics::add_finished(const request_metrics & r) {
    std::lock_guard<std::mutex> lock(m_);
    n_prompt_ += r.n_prompt - r.n_prompt_cached;
    n_prompt_cached_ += r.n_prompt_cached;
    prompt_s_ += r.prompt_s;
    predicted_s_ += r.predicted_s;
    n_predicted_finished_ += r.n_predicted > 0 ? r.n_predicted - 1 : 0; // the first comes with the prompt
    n_tokens_max_ = std::max(n_tokens_max_, r.n_prompt + r.n_predicted);
    n_rejection_ += r.rejection ? 1 : 0;
    n_drafted_ += r.stats.n_drafted;
    n_accepted_ += r.stats.n_accepted;
    n_drafts_ += r.stats.n_proposed_at[0];
    for (size_t i = 0; i < SPECDEC_MAX_DRAFT; ++i) {
        drafts_at_[i] += r.stats.n_proposed_at[i];
        accepted_at_[i] += r.stats.n_accepted_at[i];
        if (r.stats.n_proposed_at[i] > 0) {
            n_pos_ = std::max(n_pos_, i + 1);
        }
    }
    switch (r.stop) {
        case SPECDEC_STOP_EOG:
        case SPECDEC_STOP_STRING:    ++n_stop_; break;
        case SPECDEC_STOP_BUDGET:
        case SPECDEC_STOP_CONTEXT:   ++n_length_; break;
        case SPECDEC_STOP_CANCELLED:
        case SPECDEC_STOP_CALLBACK:  ++n_cancelled_; break;
        default:                     ++n_error_; break;
    }
    if (r.ttft_s >= 0) {
        ttft_.observe(r.ttft_s);
    }
    if (r.itl_s >= 0) {
        itl_.observe(r.itl_s);
    }
}

void metrics::add_rejected() {
    std::lock_guard<std::mutex> lock(m_);
    ++n_rejected_;
}

std::string metrics::render() const {
    std::lock_guard<std::mutex> lock(m_);
    std::string out;
    const auto d = [](uint64_t v) { return static_cast<double>(v); };
    const auto rate = [](double n, double s) { return s > 0 ? n / s : 0.0; };
    scalar(out, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens", d(n_prompt_));
    scalar(out, "llamacpp:prompt_tokens_cached_total", "counter",
           "Number of prompt tokens reused from a slot's memory or the prompt cache, not processed", d(n_prompt_cached_));
    scalar(out, "llamacpp:prompt_seconds_total", "counter", "Total time spent processing prompts (from each request's arrival at the engine to its first token)",
           prompt_s_);
    scalar(out, "llamacpp:tokens_predicted_seconds_total", "counter",
           "Total time spent generating tokens (after each request's first)", predicted_s_);
    scalar(out, "llamacpp:n_decode_total", "counter", "Total number of engine steps (one forward pass of the target each)",
           d(n_steps_));
    scalar(out, "llamacpp:n_tokens_max", "counter", "Largest observed sequence length (prompt + generation) of a finished request",
           d(n_tokens_max_));
    scalar(out, "llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s (since the start)",
           rate(d(n_prompt_), prompt_s_));
    scalar(out, "llamacpp:predicted_tokens_seconds", "gauge",
           "Average generation throughput in tokens/s of a request after its first token (since the start)",
           rate(d(n_predicted_finished_), predicted_s_));
    scalar(out, "llamacpp:n_busy_slots_per_decode", "gauge", "Average number of requests in slots per engine step",
           rate(d(n_busy_), d(n_steps_)));
    scalar(out, "specdec:requests_rejection_sampled_total", "counter",
           "Number of finished requests whose drafts were kept by speculative sampling (accept mode rejection, temperature > 0); "
           "the others kept them by exact matching",
           d(n_rejection_));
    scalar(out, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed", d(n_generated_));
    scalar(out, "llamacpp:spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated",
           d(n_drafted_));
    scalar(out, "llamacpp:spec_decode_num_accepted_tokens_total", "counter",
           "Speculative: Total draft tokens accepted by the target model", d(n_accepted_));
    scalar(out, "llamacpp:spec_decode_num_drafts_total", "counter",
           "Speculative: Total speculative decoding verification steps", d(n_drafts_));
    scalar(out, "llamacpp:requests_processing", "gauge", "Number of requests processing", static_cast<double>(running_));
    scalar(out, "llamacpp:requests_deferred", "gauge", "Number of requests deferred", static_cast<double>(waiting_));
    scalar(out, "specdec:requests_paused", "gauge",
           "Requests whose clients are not reading their streams: not decoded, their slots free for others",
           static_cast<double>(paused_));
    scalar(out, "specdec:prompt_cache_sequences", "gauge",
           "Slot states the prompt cache holds in host memory (--cache-ram)", static_cast<double>(cached_sequences_));
    scalar(out, "specdec:prompt_cache_bytes", "gauge", "Host bytes the prompt cache holds", static_cast<double>(cached_bytes_));
    scalar(out, "specdec:exact_kernels", "gauge",
           "1: each row of a batch is computed as alone, so output equals plain decoding; 0: --kernels fast",
           specdec_exact_kernels() ? 1.0 : 0.0);
    if (n_pos_ > 0) {
        header(out, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position");
        for (size_t i = 0; i < n_pos_; ++i) {
            out += "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"" + std::to_string(i) + "\"} " +
                   std::to_string(accepted_at_[i]) + "\n";
        }
        header(out, "specdec:spec_decode_num_drafts_per_pos_total", "counter",
               "Verified drafts with a token at this draft position (accepted per position divided by this is the "
               "acceptance rate there)");
        for (size_t i = 0; i < n_pos_; ++i) {
            out += "specdec:spec_decode_num_drafts_per_pos_total{position=\"" + std::to_string(i) + "\"} " +
                   std::to_string(drafts_at_[i]) + "\n";
        }
    }
    header(out, "specdec:requests_finished_total", "counter", "Requests that left the engine, by how they ended");
    const std::pair<const char *, uint64_t> reasons[] = {
        {"stop", n_stop_}, {"length", n_length_}, {"cancelled", n_cancelled_}, {"error", n_error_}};
    for (const auto & [reason, n] : reasons) {
        out += std::string("specdec:requests_finished_total{reason=\"") + reason + "\"} " + std::to_string(n) + "\n";
    }
    scalar(out, "specdec:requests_rejected_total", "counter",
           "Requests refused with 503 (the waiting queue was full, or the server was shutting down)", d(n_rejected_));
    ttft_.render(out, "specdec:time_to_first_token_seconds", "Time from a request's arrival to its first token");
    itl_.render(out, "specdec:inter_token_latency_seconds",
                "Mean time between a request's tokens after the first, one observation per request with two or more");
    return out;
}

} // namespace cli::serve
