// `specdec serve`, the HTTP layer (cpp-httplib from the pinned llama.cpp
// tree, without TLS, its connection loop replaced by one with deadlines):
// admission, routes, API key, body limit, error mapping, and the
// translation between request JSON / SSE and the scheduler. It owns the
// connections and cancels a request whose client went away; it never sees
// speculation (the engine does that).
#pragma once

#include "serve-chat.h"
#include "serve-metrics.h"
#include "serve-scheduler.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct llama_model;

namespace cli::serve {

// What the handlers use; everything borrowed must outlive the http_server.
struct service {
    const llama_model *    model = nullptr;      // its vocabulary tokenizes prompts
    const chat_formatter * chat = nullptr;       // messages -> prompt
    chat_options           chat_defaults;        // --reasoning-format, --chat-template-kwargs; a request's fields override them
    scheduler *            sched = nullptr;
    metrics *              stats = nullptr;
    std::string            model_id;             // GET /v1/models, and what `model` may name with strict_model
    bool                   strict_model = false; // --strict-model: a request naming another model gets 404
    std::string            strategy = "none";    // the drafter, reported per response
    int32_t                n_ctx = 0;            // positions per sequence
    size_t                 max_prompt_bytes = 0; // longer prompt text cannot fit n_ctx (checked before tokenizing); 0: no bound
    int32_t                n_draft = 0;          // request_params::n_draft for every request
    specdec_accept_mode    accept = SPECDEC_ACCEPT_REJECTION; // a request's mode unless it names one (speculative_accept)
    int                    verbosity = 0;        // >= 1: one stderr line per request
};

struct http_options {
    std::string host = "127.0.0.1";
    int         port = 8080;                     // 0: any free port (bind() returns it)
    std::string api_key;                         // non-empty: every route but /health needs "Authorization: Bearer KEY"
    size_t      max_body = size_t(8) << 20;      // request bodies above this many bytes: 413
    // Completions answered at once at most: the engine's bound, slots +
    // waiting places. Past it a completion gets 503 before its body is read.
    // Connection threads: up to twice this (streams, and connections idling
    // in keep-alive after one) plus a reserve for /health, /metrics and
    // rejections, so that those answer while every slot and place is taken.
    size_t      max_completions = 68;
    // Deadlines, in seconds, so that slow or idle clients cannot hold connection threads:
    int         header_timeout_s = 10;           // a request's line and headers arrive within this of its first byte, which arrives within this of accept
    int         body_timeout_s = 60;             // its body within this after its headers
    int         read_timeout_s = 5;              // one read waits at most this
    int         write_timeout_s = 5;             // one write waits at most this (a client that stops reading)
    int         keep_alive_s = 2;                // an idle kept-alive connection is closed after this
    // Kernel send buffer of each connection, in bytes (Linux doubles it; 0:
    // the kernel's, which grows to megabytes): a client that stops reading
    // fills it, and its stream ends write_timeout_s later (cancelled), so
    // it holds a slot for about this much unread output, not its whole budget.
    int         send_buffer = 64 << 10;
    // Browsers (the Origin policy): a request with an Origin header is
    // refused with 403 unless the origin is listed here ("*": any), or is the
    // server's own address as the request's Host names it, by an IP address
    // or localhost. Listed origins get CORS headers and preflight answers.
    // Requests without Origin (curl, SDKs) are not concerned. Each entry as
    // normalize_origin() returns it.
    std::vector<std::string> cors_origins;
};

// An --cors-origin value as an Origin header spells it (lower-case, no
// trailing slash; "*" and "null" as they are), or "" when it is none of
// "*", "null" and http[s]://host[:port] (no path).
std::string normalize_origin(const std::string & origin);

class http_server {
public:
    // Declares the routes; nothing listens yet.
    http_server(service & svc, const http_options & options);
    ~http_server();
    http_server(const http_server &) = delete;
    http_server & operator=(const http_server &) = delete;

    // Binds and listens on host:port; returns the port. Throws
    // specdec::error(IO_ERROR) when it cannot.
    int bind();
    // Accepts connections until stop(); returns once every connection thread has ended.
    void run();
    // Any thread: new requests get 503 from now on (requests in flight go on).
    void begin_shutdown();
    // Any thread: waits until no completion is being answered (a stream's
    // last bytes written) or `timeout` passed; true when none is.
    bool wait_idle(std::chrono::milliseconds timeout);
    // Any thread: closes the listening socket and cuts the streams still
    // open (httplib ends chunked responses with it); run() returns when the
    // connections end.
    void stop();

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace cli::serve
