#include "serve-http.h"

#include "specdec/specdec.hpp"

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/resource.h>

namespace cli::serve {

namespace {

using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Descriptors kept back from connections when http_options::max_connections
// is 0: the model's files, the standard streams, the io loop's own, logs.
constexpr size_t fd_reserve = 64;
// How often a connection whose client half-closed is checked for a reset (after its probe).
constexpr auto peer_poll_interval = 100ms;
// How long a closing connection reads and drops what its client still sends
// (so that its answer is not lost to a reset) before it closes.
constexpr auto linger_time = 2s;
// Accepting waits this long when the process is out of descriptors (EMFILE), instead of retrying at once.
constexpr auto accept_backoff = 100ms;

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
               return std::tolower(x) == std::tolower(y);
           });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

const char * reason_phrase(int status) {
    switch (status) {
        case 100: return "Continue";
        case 102: return "Processing";
        case 200: return "OK";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 411: return "Length Required";
        case 413: return "Payload Too Large";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        default:  return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
    }
}

// A token (RFC 9110: a method or a header name): visible ASCII but separators.
bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
        return c > 32 && c < 127 && std::string_view("\"(),/:;<=>?@[\\]{}").find(static_cast<char>(c)) == std::string_view::npos;
    });
}

// Whether the request asks that its connection end after its answer (HTTP/1.0 unless it asks to keep it).
bool wants_close(const http_request & req) {
    const std::string c = req.value("Connection");
    std::string lc(c.size(), ' ');
    std::transform(c.begin(), c.end(), lc.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (req.minor_version == 0) {
        return lc.find("keep-alive") == std::string::npos;
    }
    return lc.find("close") != std::string::npos;
}

std::string chunk(std::string_view bytes) {
    char size[24];
    const int n = std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
    std::string out;
    out.reserve(static_cast<size_t>(n) + bytes.size() + 2);
    out.append(size, static_cast<size_t>(n));
    out.append(bytes);
    out.append("\r\n");
    return out;
}

} // namespace

bool parse_head(std::string_view head, http_request & req) {
    size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) {
        return false;
    }
    const std::string_view version = line.substr(sp2 + 1);
    req.method = std::string(line.substr(0, sp1));
    req.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
    if (!is_token(req.method) || req.target.empty() || req.target.find(' ') != std::string::npos ||
        (version != "HTTP/1.1" && version != "HTTP/1.0")) {
        return false;
    }
    req.minor_version = version.back() - '0';
    req.path = req.target.substr(0, req.target.find('?'));
    while (eol != std::string_view::npos) {
        const size_t start = eol + 2;
        eol = head.find("\r\n", start);
        const std::string_view h = head.substr(start, eol == std::string_view::npos ? std::string_view::npos : eol - start);
        const size_t colon = h.find(':');
        // No obsolete line folding, no whitespace before the colon (RFC 9112 5.1, 5.2).
        if (colon == std::string_view::npos || !is_token(h.substr(0, colon))) {
            return false;
        }
        req.headers.push_back({std::string(h.substr(0, colon)), std::string(trim(h.substr(colon + 1)))});
    }
    return true;
}

std::optional<size_t> content_length(const http_request & req) {
    std::optional<size_t> n;
    for (const http_header & h : req.headers) {
        if (!iequals(h.name, "Content-Length")) {
            continue;
        }
        if (h.value.empty() || h.value.size() > 18 ||
            !std::all_of(h.value.begin(), h.value.end(), [](unsigned char c) { return std::isdigit(c); })) {
            return std::nullopt;
        }
        const size_t v = std::stoull(h.value);
        if (n && *n != v) {
            return std::nullopt;
        }
        n = v;
    }
    return n.value_or(0);
}

const std::string * http_request::find(std::string_view name) const {
    for (const http_header & h : headers) {
        if (iequals(h.name, name)) {
            return &h.value;
        }
    }
    return nullptr;
}

void raise_fd_limit() {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r); // a failure leaves the soft limit, which max_connections then follows
    }
}

namespace {

// What exchanges may reach after the server is gone (a handler's thread
// can hold one past it): the io loop to post to (null once the server is
// destroyed) and the body budget's count.
struct shared_state {
    std::mutex          m;
    asio::io_context *  io = nullptr;     // under m
    std::atomic<size_t> body_bytes{0};    // bytes of bodies charged and not handed back

    // Runs `fn` on the io thread, or drops it when the server is gone.
    void post(std::function<void()> fn) {
        std::lock_guard<std::mutex> lock(m);
        if (io != nullptr) {
            asio::post(*io, std::move(fn));
        }
    }
};

class connection;

class exchange final : public http_exchange, public std::enable_shared_from_this<exchange> {
public:
    exchange(std::shared_ptr<shared_state> st, std::weak_ptr<connection> conn, http_request req, size_t charged)
        : st_(std::move(st)), conn_(std::move(conn)), req_(std::move(req)), charged_(charged) {}
    ~exchange() override { release_body(); }

    const http_request & request() const override { return req_; }
    std::string take_body() override { return std::exchange(req_.body, std::string()); }
    void release_body() override {
        const size_t n = charged_.exchange(0);
        st_->body_bytes.fetch_sub(n);
    }
    void respond(http_response r) override;
    void stream_begin(http_response head, std::string probe) override;
    void stream_write(std::string bytes) override;
    void stream_end() override;
    void on_gone(std::function<void()> fn) override;
    void on_backlog(std::function<void(bool)> fn) override;

    // The io thread only, from here on.
    enum class phase { answering, done, gone };
    phase                     state = phase::answering;
    std::function<void()>     gone_fn;
    std::function<void(bool)> backlog_fn;
    bool                      backlogged = false; // backlog_fn(true) was the last call
    http_request          head_req; // the request's line and headers (for decorate and logs), the body left out

private:
    // Runs `fn(connection)` on the io thread while this is its connection's current exchange.
    template <class F> void on_io(F fn);

    std::shared_ptr<shared_state> st_;
    std::weak_ptr<connection>     conn_;
    http_request                  req_;
    std::atomic<size_t>           charged_;
};

} // namespace

struct http_server_impl {
    http_server_impl(http_handlers h, const http_options & o) : handlers(std::move(h)), opt(o) {
        st->io = &io;
    }
    ~http_server_impl() {
        std::lock_guard<std::mutex> lock(st->m);
        st->io = nullptr;
    }

    // A listening socket, and whether an accept is pending on it.
    struct listener {
        explicit listener(asio::io_context & io) : acceptor(io) {}
        tcp::acceptor acceptor;
        bool          accepting = false;
    };

    // Starts accepting on every listener that is not (unless at max_connections).
    void accept();
    void accept(listener & l);
    void closed(const std::shared_ptr<connection> & c);
    void answering_changed(int delta) {
        std::lock_guard<std::mutex> lock(idle_m);
        n_answering = static_cast<size_t>(static_cast<long>(n_answering) + delta);
        if (n_answering == 0) {
            idle_cv.notify_all();
        }
    }

    const http_handlers                          handlers;
    const http_options                           opt;
    asio::io_context                             io{1};
    asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
    std::shared_ptr<shared_state>                st = std::make_shared<shared_state>();
    std::unique_ptr<asio::ssl::context>          tls; // set: every connection speaks TLS
    std::list<listener>                          listeners; // one per address (a list: each keeps its place)
    asio::steady_timer                           accept_timer{io};
    size_t                                       max_connections = 0;
    // The io thread only:
    std::unordered_set<std::shared_ptr<connection>> conns; // open; a connection leaves when it closes
    bool                                         accept_paused = false; // at max_connections, until one closes
    bool                                         stopping = false;
    // Exchanges whose answer is not written yet (wait_idle):
    std::mutex                                   idle_m;
    std::condition_variable                      idle_cv;
    size_t                                       n_answering = 0;
};

namespace {

// A connection's byte stream: its TCP socket, or TLS over it. Reads and
// writes go through it; the socket itself is reached for shutdown, close
// and the peer probe.
class transport {
public:
    transport(tcp::socket sock, asio::ssl::context * tls) {
        if (tls != nullptr) {
            tls_ = std::make_unique<asio::ssl::stream<tcp::socket>>(std::move(sock), *tls);
        } else {
            plain_.emplace(std::move(sock));
        }
    }
    bool         tls() const { return tls_ != nullptr; }
    tcp::socket & socket() { return tls_ ? tls_->next_layer() : *plain_; }
    template <class Handler> void handshake(Handler && h) { tls_->async_handshake(asio::ssl::stream_base::server, std::forward<Handler>(h)); }
    template <class Buffers, class Handler> void read_some(const Buffers & b, Handler && h) {
        if (tls_) {
            tls_->async_read_some(b, std::forward<Handler>(h));
        } else {
            plain_->async_read_some(b, std::forward<Handler>(h));
        }
    }
    template <class Buffers, class Handler> void write_some(const Buffers & b, Handler && h) {
        if (tls_) {
            tls_->async_write_some(b, std::forward<Handler>(h));
        } else {
            plain_->async_write_some(b, std::forward<Handler>(h));
        }
    }

private:
    std::optional<tcp::socket>                        plain_;
    std::unique_ptr<asio::ssl::stream<tcp::socket>>   tls_;
};

// One client connection: its socket, its read buffer (pipelined requests
// wait there), its output queue and its deadline timers; owned by the
// server's set until it closes, and by the handlers of its pending operations.
class connection final : public std::enable_shared_from_this<connection> {
public:
    connection(http_server_impl & srv, tcp::socket sock)
        : srv_(srv), opt_(srv.opt), sock_(std::move(sock), srv.tls.get()), deadline_(srv.io), write_timer_(srv.io), peer_timer_(srv.io) {}

    // The first request's line and headers must come within header_timeout_s,
    // a TLS handshake before them included.
    void start() {
        arm(std::chrono::seconds(opt_.header_timeout_s));
        if (!sock_.tls()) {
            read();
            return;
        }
        sock_.handshake([self = shared_from_this()](const std::error_code & ec) {
            if (self->closed_) {
                return;
            }
            if (ec) {
                self->close_now(); // not TLS, or a handshake that failed
                return;
            }
            self->guarded([&] { self->read(); });
        });
    }

    // Ends it at once (the server stops, a deadline, a reset): an exchange
    // still answering is gone.
    void close_now() {
        if (closed_) {
            return;
        }
        closed_ = true;
        lose();
        std::error_code ignored;
        deadline_.cancel();
        write_timer_.cancel();
        peer_timer_.cancel();
        sock_.socket().close(ignored);
        srv_.closed(shared_from_this());
    }

    // exchange's calls, on the io thread; `ex` must be the current exchange.
    void respond(http_response r) {
        if (head_sent_) {
            return;
        }
        queue_head(r, false);
        answer_queued_ = true;
        flush();
    }
    void stream_begin(http_response head, std::string probe) {
        if (head_sent_) {
            return;
        }
        probe_ = std::move(probe);
        queue_head(head, true);
        streaming_ = true;
        if (eof_ && !probed_) {
            send_probe();
        }
        flush();
    }
    void stream_write(std::string bytes) {
        if (!streaming_ || answer_queued_ || bytes.empty()) {
            return;
        }
        push(framed(bytes));
        if (queued_ > opt_.max_queued) {
            close_now(); // a client that does not read: gone
            return;
        }
        if (queued_ > opt_.backlog_queued) {
            backlog(true);
        }
        flush();
    }
    void stream_end() {
        if (!streaming_ || answer_queued_) {
            return;
        }
        if (!unframed_) {
            push("0\r\n\r\n");
        }
        answer_queued_ = true;
        flush();
    }
    const std::shared_ptr<exchange> & current() const { return ex_; }

    // Runs `f`, part of this connection's work on the io thread; a handler
    // that throws (out of memory, a bug) ends this connection, not the server.
    template <class F> void guarded(F && f) {
        try {
            f();
        } catch (const std::exception &) {
            close_now();
        }
    }

private:
    enum class phase {
        head,       // waiting for a request's line and headers (idle between requests)
        body,       // reading a body for the handler
        discarding, // reading and dropping a body answered before it was read
        answering,  // the handler answers; bytes read wait in in_ (pipelining)
        closing,    // the write side shut; reading and dropping until end of file or the linger time
    };

    // The deadline timer: `d` from now, for whatever the phase is; a later arm() replaces it.
    void arm(std::chrono::steady_clock::duration d) {
        const uint64_t gen = ++deadline_gen_;
        deadline_.expires_after(d);
        deadline_.async_wait([self = shared_from_this(), gen](const std::error_code & ec) {
            if (!ec && gen == self->deadline_gen_) {
                self->guarded([&] { self->deadline_passed(); });
            }
        });
    }
    void disarm() {
        ++deadline_gen_;
        deadline_.cancel();
    }

    void deadline_passed() {
        if (closed_) {
            return;
        }
        switch (phase_) {
            case phase::head:
                // A connection that sent nothing (or is idle after an answer) just closes.
                if (in_.find_first_not_of("\r\n") == std::string::npos) {
                    close_now();
                } else {
                    fail(http_failure::timeout);
                }
                return;
            case phase::body:
                release_charge();
                fail(http_failure::timeout);
                return;
            case phase::discarding:
            case phase::closing:
            case phase::answering:
                close_now();
                return;
        }
    }

    bool may_read() const {
        // While answering, pipelined bytes wait up to a head's worth; then reading pauses.
        return !closed_ && !reading_ && !eof_ && !(phase_ == phase::answering && in_.size() >= opt_.max_head);
    }

    void read() {
        if (!may_read()) {
            return;
        }
        reading_ = true;
        sock_.read_some(asio::buffer(buf_), [self = shared_from_this()](const std::error_code & ec, size_t n) {
            self->reading_ = false;
            self->guarded([&] { self->on_read(ec, n); });
        });
    }

    void on_read(const std::error_code & ec, size_t n) {
        if (closed_) {
            return;
        }
        if (ec == asio::error::eof) {
            on_eof();
            return;
        }
        if (ec) {
            close_now(); // a reset: while answering, the client is gone
            return;
        }
        if (phase_ == phase::closing) {
            read();
            return;
        }
        const bool first = in_.find_first_not_of("\r\n") == std::string::npos;
        in_.append(buf_.data(), n);
        if (phase_ == phase::head && first) {
            // The first byte of a request: its line and headers have header_timeout_s from now.
            arm(std::chrono::seconds(opt_.header_timeout_s));
        }
        advance();
        read();
    }

    void on_eof() {
        eof_ = true;
        switch (phase_) {
            case phase::head:
                if (in_.find_first_not_of("\r\n") == std::string::npos) {
                    close_now();
                } else {
                    fail(http_failure::bad_request); // a request cut short
                }
                return;
            case phase::body:
                release_charge();
                close_now();
                return;
            case phase::discarding:
                discard_left_ = 0;
                body_done_ = true;
                close_after_ = true;
                next();
                return;
            case phase::closing:
                close_now();
                return;
            case phase::answering:
                // Half-closed, or closed: the probe tells (see http_exchange::on_gone).
                if (ex_ != nullptr && !probed_) {
                    send_probe();
                    flush();
                }
                next();
                return;
        }
    }

    // Writes what the client must skip, then checks for its reset every peer_poll_interval.
    void send_probe() {
        if (streaming_) {
            if (probe_.empty()) {
                return;
            }
            push(framed(probe_));
        } else if (!head_sent_ && ex_->head_req.minor_version == 1) {
            push("HTTP/1.1 102 Processing\r\n\r\n");
        } else {
            return; // an HTTP/1.0 client gets no interim answer: its answer runs to its end
        }
        probed_ = true;
        poll_peer();
    }

    void poll_peer() {
        peer_timer_.expires_after(peer_poll_interval);
        peer_timer_.async_wait([self = shared_from_this()](const std::error_code & ec) {
            if (ec || self->closed_ || self->ex_ == nullptr) {
                return;
            }
            pollfd p{self->sock_.socket().native_handle(), POLLIN, 0};
            if (poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
                self->close_now(); // the probe met a reset: gone
                return;
            }
            self->poll_peer();
        });
    }

    // Takes what in_ holds as far as the phase goes: a head, body bytes, bytes to drop.
    void advance() {
        while (!closed_) {
            if (phase_ == phase::discarding || phase_ == phase::body) {
                const size_t k = std::min(in_.size(), phase_ == phase::body ? body_left_ : discard_left_);
                if (phase_ == phase::body) {
                    req_.body.append(in_, 0, k);
                    body_left_ -= k;
                } else {
                    discard_left_ -= k;
                }
                in_.erase(0, k);
                if ((phase_ == phase::body ? body_left_ : discard_left_) > 0) {
                    return;
                }
                body_done_ = true;
                if (phase_ == phase::body) {
                    dispatch();
                } else {
                    phase_ = phase::answering; // its answer may still be on its way
                    next();
                }
                return;
            }
            if (phase_ != phase::head) {
                return;
            }
            // Empty lines before a request are skipped (RFC 9112 2.2).
            const size_t start = in_.find_first_not_of("\r\n");
            in_.erase(0, start == std::string::npos ? in_.size() : start);
            const size_t end = in_.find("\r\n\r\n");
            if (end == std::string::npos || end + 4 > opt_.max_head) {
                if (end != std::string::npos || in_.size() > opt_.max_head) {
                    fail(http_failure::headers_too_large);
                }
                return;
            }
            req_ = http_request();
            const bool ok = parse_head(std::string_view(in_).substr(0, end), req_);
            in_.erase(0, end + 4);
            if (!ok) {
                fail(http_failure::bad_request);
                return;
            }
            headers_in();
        }
    }

    // The request's line and headers are in: answer it now, or read its body.
    void headers_in() {
        close_after_ = wants_close(req_);
        const std::optional<size_t> n = content_length(req_);
        if (!n) {
            fail(http_failure::bad_request);
            return;
        }
        if (req_.has("Transfer-Encoding")) {
            fail(http_failure::length_required);
            return;
        }
        body_len_ = *n;
        hold_.reset();
        std::optional<http_response> early = srv_.handlers.on_headers(req_, hold_);
        if (!early && body_len_ > opt_.max_body) {
            early = srv_.handlers.on_failure(http_failure::too_large, req_);
        }
        if (!early && body_len_ > 0) {
            size_t used = srv_.st->body_bytes.load();
            while (used + body_len_ <= opt_.body_budget && !srv_.st->body_bytes.compare_exchange_weak(used, used + body_len_)) {
            }
            if (used + body_len_ > opt_.body_budget) {
                early = srv_.handlers.on_failure(http_failure::body_budget, req_);
            } else {
                charged_ = body_len_;
            }
        }
        if (early) {
            answer_early(std::move(*early));
            return;
        }
        const std::string * expect = req_.find("Expect");
        if (expect != nullptr && iequals(*expect, "100-continue") && req_.minor_version == 1 && in_.size() < body_len_) {
            push("HTTP/1.1 100 Continue\r\n\r\n");
            flush();
        }
        phase_ = phase::body;
        body_left_ = body_len_;
        req_.body.reserve(body_len_);
        arm(std::chrono::seconds(opt_.body_timeout_s));
    }

    // An answer before the body is read: the body, when it is not larger
    // than a body may be, is read and dropped (the connection then serves
    // the next request); a larger one ends the connection (after the linger,
    // so that the answer is not lost to a reset).
    void answer_early(http_response r) {
        hold_.reset();
        const bool drop = body_len_ > 0 && body_len_ <= opt_.max_body;
        close_after_ = close_after_ || body_len_ > opt_.max_body;
        queue_head(r, false);
        answer_queued_ = true;
        if (!drop) {
            body_done_ = true;
            phase_ = phase::answering;
            disarm();
        } else {
            phase_ = phase::discarding;
            discard_left_ = body_len_;
            arm(std::chrono::seconds(opt_.body_timeout_s));
        }
        flush();
        advance();
    }

    // A framing or deadline failure: its answer, then the connection closes.
    void fail(http_failure f) {
        if (ex_ != nullptr || answer_queued_) {
            close_now();
            return;
        }
        close_after_ = true;
        body_len_ = 0;
        body_done_ = true;
        phase_ = phase::answering;
        disarm();
        http_response r = srv_.handlers.on_failure(f, req_);
        queue_head(r, false);
        answer_queued_ = true;
        flush();
    }

    void release_charge() {
        srv_.st->body_bytes.fetch_sub(std::exchange(charged_, size_t(0)));
    }

    // The body is in: the handler answers it, from here or another thread.
    void dispatch() {
        phase_ = phase::answering;
        disarm();
        std::string body = std::move(req_.body);
        http_request head = req_; // without the body: the io thread's copy
        req_.body = std::move(body);
        ex_ = std::make_shared<exchange>(srv_.st, weak_from_this(), std::move(req_), std::exchange(charged_, size_t(0)));
        ex_->head_req = std::move(head);
        req_ = http_request();
        srv_.answering_changed(+1);
        if (eof_) {
            send_probe(); // the client half-closed with (or before) this request
            flush();
        }
        srv_.handlers.on_request(ex_, std::move(hold_));
    }

    // A stream's bytes as its framing carries them: chunks, or as they are
    // for an HTTP/1.0 client (which reads chunks as data; its stream ends
    // with the connection).
    std::string framed(std::string_view bytes) const { return unframed_ ? std::string(bytes) : chunk(bytes); }

    void queue_head(http_response & r, bool stream) {
        const http_request & req = ex_ != nullptr ? ex_->head_req : req_;
        if (srv_.handlers.decorate) {
            srv_.handlers.decorate(req, r);
        }
        unframed_ = stream && req.minor_version == 0;
        if (srv_.stopping || unframed_) {
            close_after_ = true;
        }
        const bool chunked = stream && !unframed_;
        std::string h = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
        if (!r.content_type.empty()) {
            h += "Content-Type: " + r.content_type + "\r\n";
        }
        if (chunked) {
            h += "Transfer-Encoding: chunked\r\n";
        } else if (!stream) {
            h += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
        }
        if (close_after_) {
            h += "Connection: close\r\n";
        } else {
            h += req.minor_version == 0 ? "Connection: keep-alive\r\n" : ""; // HTTP/1.0 keeps it only when told
            h += "Keep-Alive: timeout=" + std::to_string(opt_.keep_alive_s) + "\r\n";
        }
        for (const http_header & x : r.headers) {
            h += x.name + ": " + x.value + "\r\n";
        }
        h += "\r\n";
        if (!stream) {
            h += r.body;
        }
        head_sent_ = true;
        status_ = r.status;
        push(std::move(h));
    }

    void push(std::string bytes) {
        queued_ += bytes.size();
        out_.push_back(std::move(bytes));
    }

    // Writes what is queued, as much as the socket takes at a time: each
    // write (not the whole answer) waits at most write_timeout_s.
    void flush() {
        if (writing_ || closed_) {
            return;
        }
        if (out_.empty()) {
            if (answer_queued_ && !answer_written_) { // an end that adds no bytes (an unchunked stream's)
                answer_written_ = true;
                next();
            }
            return;
        }
        writing_ = true;
        std::vector<asio::const_buffer> bufs;
        for (auto it = out_.begin(); it != out_.end() && bufs.size() < 64; ++it) {
            const size_t skip = it == out_.begin() ? out_off_ : 0;
            bufs.push_back(asio::buffer(it->data() + skip, it->size() - skip));
        }
        const uint64_t gen = ++write_gen_;
        write_timer_.expires_after(std::chrono::seconds(opt_.write_timeout_s));
        write_timer_.async_wait([self = shared_from_this(), gen](const std::error_code & ec) {
            if (!ec && self->writing_ && gen == self->write_gen_) {
                self->close_now(); // the client stopped reading: gone
            }
        });
        // The strings stay in out_ (a deque: pushing keeps them in place) until written.
        sock_.write_some(bufs, [self = shared_from_this()](const std::error_code & ec, size_t n) {
            self->writing_ = false;
            self->write_timer_.cancel();
            if (self->closed_) {
                return;
            }
            if (ec) {
                self->close_now(); // a write that failed: gone
                return;
            }
            self->written(n);
            self->guarded([&] { self->flush(); }); // the rest, or the answer's end
        });
    }

    // Tells the exchange's backlog_fn when its stream's state changes.
    void backlog(bool full) {
        if (ex_ != nullptr && ex_->backlogged != full) {
            ex_->backlogged = full;
            if (ex_->backlog_fn) {
                ex_->backlog_fn(full);
            }
        }
    }

    void written(size_t n) {
        queued_ -= n;
        if (queued_ == 0 && streaming_) {
            backlog(false);
        }
        while (n > 0) {
            const size_t left = out_.front().size() - out_off_;
            if (n < left) {
                out_off_ += n;
                return;
            }
            n -= left;
            out_.pop_front();
            out_off_ = 0;
        }
    }

    // The answer is written and the body read: the next request, or the end.
    void next() {
        if (closed_ || !answer_written_ || !body_done_) {
            return;
        }
        if (ex_ != nullptr) {
            ex_->state = exchange::phase::done;
            ex_->gone_fn = nullptr;
            ex_->backlog_fn = nullptr;
            if (srv_.handlers.on_answered) {
                srv_.handlers.on_answered(ex_->head_req, status_);
            }
            ex_.reset();
            srv_.answering_changed(-1);
        } else if (srv_.handlers.on_answered) {
            srv_.handlers.on_answered(req_, status_);
        }
        peer_timer_.cancel();
        req_ = http_request();
        hold_.reset();
        body_len_ = body_left_ = discard_left_ = 0;
        answer_queued_ = answer_written_ = body_done_ = streaming_ = unframed_ = head_sent_ = probed_ = false;
        probe_.clear();
        if (close_after_) {
            linger();
            return;
        }
        phase_ = phase::head;
        // Idle until the next request's first byte, which restarts the deadline (on_read).
        const bool begun = in_.find_first_not_of("\r\n") != std::string::npos; // a pipelined request
        arm(std::chrono::seconds(begun ? opt_.header_timeout_s : opt_.keep_alive_s));
        advance();
        if (eof_ && !closed_ && (phase_ == phase::head || phase_ == phase::body)) {
            on_eof(); // what is left of the client's requests cannot grow any more
            return;
        }
        read();
    }

    // Shuts the write side (the answer is out), then drops what the client
    // still sends until its end of file or linger_time: closing at once
    // with unread bytes would send a reset, which can destroy the answer
    // before the client reads it.
    void linger() {
        phase_ = phase::closing;
        std::error_code ignored;
        sock_.socket().shutdown(tcp::socket::shutdown_send, ignored); // (TLS: without close_notify; the answer's length is known)
        if (eof_) {
            close_now();
            return;
        }
        in_.clear();
        arm(linger_time);
        read();
    }

    // The current exchange ends unanswered: its client is gone.
    void lose() {
        release_charge();
        hold_.reset();
        if (ex_ == nullptr) {
            return;
        }
        const std::shared_ptr<exchange> ex = std::move(ex_);
        ex->state = exchange::phase::gone;
        srv_.answering_changed(-1);
        ex->backlog_fn = nullptr;
        if (ex->gone_fn) {
            std::function<void()> fn = std::move(ex->gone_fn);
            fn();
        }
    }

    http_server_impl &          srv_;
    const http_options &         opt_;
    transport                    sock_;
    asio::steady_timer           deadline_;    // the phase's deadline (arm)
    asio::steady_timer           write_timer_; // the write in flight's
    asio::steady_timer           peer_timer_;  // after a probe: checks for a reset
    uint64_t                     deadline_gen_ = 0;
    uint64_t                     write_gen_ = 0;
    std::array<char, 4096>       buf_{};       // each read's
    std::string                  in_;          // read, not taken yet
    std::deque<std::string>      out_;         // queued (the front one partly written)
    size_t                       out_off_ = 0; // bytes of out_.front() written
    size_t                       queued_ = 0;  // bytes in out_ not written
    phase                        phase_ = phase::head;
    bool                         reading_ = false;
    bool                         writing_ = false;
    bool                         eof_ = false;     // the client sends nothing more
    bool                         closed_ = false;
    // The current request:
    http_request                 req_;             // until it is dispatched (then the exchange's)
    std::shared_ptr<void>        hold_;            // on_headers's, until dispatched or answered
    std::shared_ptr<exchange>    ex_;              // dispatched, not yet answered in full
    size_t                       body_len_ = 0;
    size_t                       body_left_ = 0;   // to read (phase body)
    size_t                       discard_left_ = 0; // to drop (phase discarding)
    size_t                       charged_ = 0;     // against the body budget, until dispatched
    bool                         close_after_ = false;
    bool                         body_done_ = false;
    bool                         answer_queued_ = false;
    bool                         answer_written_ = false;
    bool                         head_sent_ = false;
    bool                         streaming_ = false;
    bool                         unframed_ = false; // a stream to an HTTP/1.0 client: no chunks, the connection's end ends it
    bool                         probed_ = false;
    std::string                  probe_;
    int                          status_ = 0;
};

template <class F> void exchange::on_io(F fn) {
    st_->post([self = shared_from_this(), fn = std::move(fn)]() mutable {
        const std::shared_ptr<connection> c = self->conn_.lock();
        if (c != nullptr && c->current().get() == self.get()) {
            c->guarded([&] { fn(*c); });
        }
    });
}

void exchange::respond(http_response r) {
    on_io([r = std::move(r)](connection & c) mutable { c.respond(std::move(r)); });
}

void exchange::stream_begin(http_response head, std::string probe) {
    on_io([head = std::move(head), probe = std::move(probe)](connection & c) mutable { c.stream_begin(std::move(head), std::move(probe)); });
}

void exchange::stream_write(std::string bytes) {
    on_io([bytes = std::move(bytes)](connection & c) mutable { c.stream_write(std::move(bytes)); });
}

void exchange::stream_end() {
    on_io([](connection & c) { c.stream_end(); });
}

void exchange::on_gone(std::function<void()> fn) {
    st_->post([self = shared_from_this(), fn = std::move(fn)]() mutable {
        if (self->state == phase::gone) {
            fn();
        } else if (self->state == phase::answering) {
            self->gone_fn = std::move(fn);
        }
    });
}

void exchange::on_backlog(std::function<void(bool)> fn) {
    st_->post([self = shared_from_this(), fn = std::move(fn)]() mutable {
        if (self->state == phase::answering) {
            self->backlog_fn = std::move(fn);
        }
    });
}

// EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays in the backlog, and accepting at once would fail again at once.
bool is_out_of_descriptors(const std::error_code & ec) {
    return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space || ec == asio::error::no_memory ||
           (ec.category() == asio::error::get_system_category() && ec.value() == ENFILE);
}

} // namespace

void http_server_impl::accept() {
    for (listener & l : listeners) {
        if (!l.accepting) {
            accept(l);
        }
    }
}

void http_server_impl::accept(listener & l) {
    if (stopping) {
        return;
    }
    if (conns.size() >= max_connections) {
        accept_paused = true; // closed() resumes
        return;
    }
    l.accepting = true;
    l.acceptor.async_accept([this, &l](const std::error_code & ec, tcp::socket sock) {
        l.accepting = false;
        if (stopping || ec == asio::error::operation_aborted) {
            return;
        }
        if (ec) {
            if (is_out_of_descriptors(ec)) {
                accept_timer.expires_after(accept_backoff);
                accept_timer.async_wait([this](const std::error_code & e) {
                    if (!e) {
                        accept(); // every listener that waits (a later backoff's wait covers an earlier one's)
                    }
                });
                return;
            }
            accept(l); // the peer gave up before it was accepted
            return;
        }
        std::error_code ignored;
        sock.set_option(tcp::no_delay(true), ignored); // stream chunks go out as they come
        if (opt.send_buffer > 0) {
            sock.set_option(asio::socket_base::send_buffer_size(opt.send_buffer), ignored);
        }
        auto c = std::make_shared<connection>(*this, std::move(sock));
        conns.insert(c);
        c->start();
        accept(l);
    });
}

void http_server_impl::closed(const std::shared_ptr<connection> & c) {
    conns.erase(c);
    if (accept_paused && !stopping) {
        accept_paused = false;
        accept();
    }
}

http_server::http_server(http_handlers handlers, const http_options & options)
    : impl_(std::make_unique<http_server_impl>(std::move(handlers), options)) {
    rlimit r{};
    const size_t fds = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? static_cast<size_t>(r.rlim_cur) : size_t(1) << 20;
    impl_->max_connections = options.max_connections > 0 ? options.max_connections : std::max<size_t>(fds > fd_reserve ? fds - fd_reserve : 0, 16);
    if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
        auto tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
        tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                         asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
        std::error_code ec;
        tls->use_certificate_chain_file(options.tls_cert_file, ec);
        if (ec) {
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot load the TLS certificate " + options.tls_cert_file + ": " + ec.message());
        }
        tls->use_private_key_file(options.tls_key_file, asio::ssl::context::pem, ec);
        if (ec) {
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot load the TLS key " + options.tls_key_file + ": " + ec.message());
        }
        impl_->tls = std::move(tls);
    }
}

http_server::~http_server() = default;

namespace {

// Opens `acceptor` listening on one of host:port's addresses; false when none can be.
bool listen_on(asio::io_context & io, tcp::acceptor & acceptor, const std::string & host, int port) {
    std::error_code ec;
    tcp::resolver resolver(io);
    const auto endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    for (const auto & e : endpoints) {
        if (ec) {
            break;
        }
        std::error_code err;
        acceptor.close(err);
        // SO_REUSEADDR only (asio's reuse_address): a second server cannot bind the same port.
        if (!acceptor.open(e.endpoint().protocol(), err) && !acceptor.set_option(tcp::acceptor::reuse_address(true), err) &&
            !acceptor.bind(e.endpoint(), err) && !acceptor.listen(asio::socket_base::max_listen_connections, err)) {
            return true;
        }
    }
    std::error_code ignored;
    acceptor.close(ignored);
    return false;
}

} // namespace

int http_server::bind() {
    http_server_impl & s = *impl_;
    if (s.opt.hosts.empty()) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "no address to listen on");
    }
    int port = s.opt.port; // 0: the first address's free port, then the same for the others
    for (const std::string & host : s.opt.hosts) {
        http_server_impl::listener & l = s.listeners.emplace_back(s.io);
        if (!listen_on(s.io, l.acceptor, host, port)) {
            const std::string where = host + ":" + std::to_string(port);
            s.listeners.clear();
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot listen on " + where + " (in use, or not an address of this machine)");
        }
        port = l.acceptor.local_endpoint().port();
    }
    return port;
}

void http_server::run() {
    asio::post(impl_->io, [s = impl_.get()] { s->accept(); });
    // What a connection's guard did not catch (a throw while it closes) ends
    // that handler, not the loop.
    for (;;) {
        try {
            impl_->io.run();
            return;
        } catch (const std::exception &) {
        }
    }
}

bool http_server::wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(impl_->idle_m);
    return impl_->idle_cv.wait_for(lock, timeout, [this] { return impl_->n_answering == 0; });
}

void http_server::stop() {
    asio::post(impl_->io, [s = impl_.get()] {
        s->stopping = true;
        std::error_code ignored;
        for (http_server_impl::listener & l : s->listeners) {
            l.acceptor.close(ignored);
        }
        s->accept_timer.cancel();
        const std::vector<std::shared_ptr<connection>> open(s->conns.begin(), s->conns.end());
        for (const auto & c : open) {
            c->close_now();
        }
        s->work.reset();
        s->io.stop();
    });
}

} // namespace cli::serve
