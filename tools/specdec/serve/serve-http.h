// `specdec serve`, the HTTP/1.1 transport: connections, request framing,
// deadlines and limits, on standalone Asio. One io thread (whichever calls
// http_server::run()) owns every socket and timer, so an idle, slow or
// half-open connection costs a small state object and its buffers, never a
// thread. It knows nothing of routes, JSON or the engine: the handlers
// (serve-routes.h) decide what to answer, and may answer from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cli::serve {

struct http_header {
    std::string name;  // as sent
    std::string value; // without the whitespace around it
};

// A request's header names compare case-insensitively; a repeated header's first value is the one read.
struct http_request {
    std::string              method;
    std::string              target;            // as sent ("/v1/models?x=1")
    std::string              path;              // the target up to '?'
    int                      minor_version = 1; // HTTP/1.<this>
    std::vector<http_header> headers;
    std::string              body;              // empty until it is read (Content-Length bytes)

    // The first value of header `name`; null when absent. Valid while the request is.
    const std::string * find(std::string_view name) const;
    std::string         value(std::string_view name) const { const std::string * v = find(name); return v != nullptr ? *v : std::string(); }
    bool                has(std::string_view name) const { return find(name) != nullptr; }
};

// Request framing (RFC 9112), as each connection frames its requests; also
// what fuzz/fuzz-serve.cpp drives. parse_head: a request's line and headers
// (`head`, without the blank line ending them) into `req`; false when it is
// not HTTP/1.0 or 1.1. content_length: the body's length from
// Content-Length; nullopt when it is malformed or its copies disagree (a
// smuggling attempt); 0 when absent.
bool                  parse_head(std::string_view head, http_request & req);
std::optional<size_t> content_length(const http_request & req);

struct http_response {
    int                      status = 200;
    std::string              content_type;    // empty: no Content-Type
    std::string              body;            // ignored for a stream's head
    std::vector<http_header> headers;         // besides Content-Type, Content-Length, Transfer-Encoding, Connection, Keep-Alive (the transport's)

    void set(std::string name, std::string value) { headers.push_back({std::move(name), std::move(value)}); }
};

// Framing and deadline failures, answered by the transport with the
// handlers' error() (their error shape): what happened, not the status.
enum class http_failure {
    bad_request,        // 400: malformed request line, headers or Content-Length
    timeout,            // 408: the line and headers, or the body, missed their deadline
    length_required,    // 411: a Transfer-Encoding body (chunked request bodies are not read)
    too_large,          // 413: Content-Length above http_options::max_body
    headers_too_large,  // 431: the line and headers above http_options::max_head
    body_budget,        // 503: the bodies being read and parsed hold http_options::body_budget already
};

// One request being answered, shared by the io thread and the handler.
// Every member is callable from any thread (it posts to the io thread);
// after the connection closed, or after the answer is complete, they do
// nothing. The answer is respond(), or stream_begin() + stream_write()* +
// stream_end(), once.
class http_exchange {
public:
    virtual ~http_exchange() = default;

    // The request's line and headers, and its body until take_body(); the
    // handler's (the transport does not touch it once it handed it over).
    virtual const http_request & request() const = 0;
    // Moves the body out (later calls return ""): it is the handler's to free.
    virtual std::string take_body() = 0;
    // Hands back what the request's body was charged against the body
    // budget (http_options::body_budget): call it once the body and what was
    // parsed from it are freed. Idempotent; the exchange's end does it too.
    virtual void release_body() = 0;
    // The whole answer.
    virtual void respond(http_response r) = 0;
    // A chunked answer: its status and headers now, its body as written.
    // `probe`: bytes a client skips (an SSE comment), written when the
    // client's end of file has to be told from a close (see on_gone).
    virtual void stream_begin(http_response head, std::string probe) = 0;
    // A chunk; bytes queued past http_options::max_queued end the connection (on_gone runs).
    virtual void stream_write(std::string bytes) = 0;
    virtual void stream_end() = 0;
    // Runs `fn` once, on the io thread, when the client is found gone
    // before the answer was written: a reset, a write that failed or waited
    // past write_timeout_s, a stream queued past max_queued, or the server
    // stopping. A client that only half-closed (shut its write side) is not
    // gone: at its end of file the transport writes a probe the answer may
    // carry (an interim 102 before an HTTP/1.1 answer's head; the stream's
    // `probe` in a stream) and a client that closed its socket answers it
    // with a reset. Set it before the first answer call; it holds what it captures until the exchange ends.
    virtual void on_gone(std::function<void()> fn) = 0;
    // Runs `fn(true)` on the io thread when a stream's bytes waiting to be
    // written (past the kernel's send buffer) rise above
    // http_options::backlog_queued, and `fn(false)` once they are all
    // written again: a client reading slower than the stream is written
    // (what it is sent should then wait for it). Set it before stream_begin;
    // it holds what it captures until the exchange ends.
    virtual void on_backlog(std::function<void(bool)> fn) = 0;
};

struct http_handlers {
    // The io thread, once a request's line and headers are in, before its
    // body is read: an answer now (the body is then discarded unread, or
    // the connection closed), or nullopt to read it. `hold`: anything the
    // handler wants kept until the exchange ends (e.g. an admission place);
    // it is dropped with the request when it is answered here or its body
    // fails. Keep it cheap: it runs on the io thread.
    std::function<std::optional<http_response>(const http_request &, std::shared_ptr<void> & hold)> on_headers;
    // The io thread, the body in: start the answer and return at once
    // (answer from another thread; never block here). `hold` is on_headers's.
    std::function<void(const std::shared_ptr<http_exchange> &, std::shared_ptr<void> hold)> on_request;
    // The io thread: the answer to a framing or deadline failure. `req`: what
    // was read of the request (its method and headers may be empty).
    std::function<http_response(http_failure, const http_request & req)> on_failure;
    // The io thread, every answer's head just before it is written
    // (respond, stream_begin, on_headers's and on_failure's answers): adds
    // the headers every answer carries (CORS). May be empty.
    std::function<void(const http_request &, http_response &)> decorate;
    // The io thread, each answer written: one line to log. May be empty.
    std::function<void(const http_request &, int status)> on_answered;
};

struct http_options {
    std::vector<std::string> hosts = {"127.0.0.1"}; // the addresses listened on (at least one), each on `port`
    // TLS (llama-server's --ssl-cert-file / --ssl-key-file): both PEM files,
    // or both empty for plain HTTP. Every connection then begins with a TLS
    // handshake, within header_timeout_s of its accept.
    std::string tls_cert_file;
    std::string tls_key_file;
    int         port = 8080;                      // 0: any free port, the same for every address (bind() returns it)
    // Connections open at once at most: past it, accepting pauses until one
    // closes (new ones wait in the kernel's backlog). 0: the descriptor
    // limit (RLIMIT_NOFILE, raised to its hard limit by raise_fd_limit())
    // less a reserve for the model's files and the process's own.
    size_t      max_connections = 0;
    size_t      max_body = size_t(8) << 20;       // bytes of one request body at most; more: 413 before it is read
    // Bytes of request bodies being read or parsed at once, across all
    // connections, charged from Content-Length before a body is read and
    // handed back by http_exchange::release_body(): past it, 503 before the
    // body is read (the handler's parse then runs on bodies within it).
    size_t      body_budget = size_t(64) << 20;
    size_t      max_head = 16 << 10;              // bytes of a request's line and headers at most; more: 431
    size_t      max_queued = 256 << 10;           // bytes of a stream waiting to be written (past the kernel's send buffer); more: the client is gone
    size_t      backlog_queued = 16 << 10;        // more waiting than this: the stream is backlogged (http_exchange::on_backlog)
    // Deadlines, in seconds; each is a timer, never a thread:
    int         header_timeout_s = 10;            // a request's line and headers arrive within this of its first byte; a new connection's first byte within this of accept
    int         body_timeout_s = 60;              // its body within this after its headers
    int         write_timeout_s = 60;             // a write waits at most this (a client that stops reading is gone)
    int         keep_alive_s = 5;                 // an idle kept-alive connection closes after exactly this (advertised as Keep-Alive: timeout=N)
    // Kernel send buffer of each connection, in bytes (Linux doubles it; 0:
    // the kernel's, which grows to megabytes): what a client that stops
    // reading holds besides max_queued.
    int         send_buffer = 64 << 10;
};

// Raises this process's soft descriptor limit (RLIMIT_NOFILE) to its hard
// one, where it can. Call once at start, before any thread.
void raise_fd_limit();

struct http_server_impl; // serve-http.cpp's

class http_server {
public:
    // `handlers` are copied; what they borrow must outlive the server.
    // Nothing listens yet. Throws specdec::error(IO_ERROR) when the TLS
    // certificate or key cannot be loaded.
    http_server(http_handlers handlers, const http_options & options);
    ~http_server();
    http_server(const http_server &) = delete;
    http_server & operator=(const http_server &) = delete;

    // Binds and listens on every host at port; returns the port. Throws
    // specdec::error(IO_ERROR) when it cannot listen on one of them.
    int bind();
    // The io loop, on the calling thread: serves until stop(); returns once
    // every connection is closed.
    void run();
    // Any thread: waits until no request is being answered (a stream's last
    // bytes written, or its connection closed) or `timeout` passed; true when none is.
    bool wait_idle(std::chrono::milliseconds timeout);
    // Any thread: closes the listening sockets and every connection (a
    // stream still open is cut; its on_gone runs); run() then returns.
    void stop();

private:
    std::unique_ptr<http_server_impl> impl_;
};

} // namespace cli::serve
