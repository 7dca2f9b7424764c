#include "serve-http.h"

#include "cli-common.h"
#include "serve-grammar.h"
#include "json-text.h"
#include "serve-openai.h"

#include "httplib.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cli::serve {

namespace {

using namespace std::chrono_literals;

// How long a provider waits for text before it checks that the client is still there.
constexpr auto poll_interval = 100ms;

void send_error(httplib::Response & res, const api_error & e) {
    res.status = e.status();
    if (e.status() == 503) {
        res.set_header("Retry-After", "1");
    }
    res.set_content(json_text(error_body(e), -1), "application/json");
}

api_error unavailable(const std::string & message, const std::string & code) {
    return api_error(503, "unavailable_error", message, "", code);
}

api_error payload_too_large() {
    return api_error(413, "invalid_request_error", "the request body is larger than this server takes", "", "payload_too_large");
}

api_error server_error(const std::string & message) {
    return api_error(500, "server_error", message, "", "internal_error");
}

api_error request_timeout() {
    return api_error(408, "invalid_request_error",
                     "the request did not arrive in time (its line and headers within the header deadline, its body within the body "
                     "deadline, each read within the read deadline)",
                     "", "request_timeout");
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return s;
}

// Splits "host[:port]" (an IPv6 host in brackets) into its lower-case host
// and its port, `default_port` when absent; false when it is not one.
bool split_host_port(const std::string & s, const std::string & default_port, std::string & host, std::string & port) {
    size_t end = s.size(); // of the host
    if (!s.empty() && s[0] == '[') {
        end = s.find(']');
        if (end == std::string::npos) {
            return false;
        }
        ++end;
    } else {
        end = std::min(s.find(':'), s.size());
    }
    host = lower(s.substr(0, end));
    port = end == s.size() ? default_port : s.substr(end + 1);
    const bool digits = !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); });
    return !host.empty() && (end == s.size() || s[end] == ':') && digits;
}

// An IPv4 or bracketed IPv6 address, or localhost: a name no one else's DNS answers for.
bool is_address_or_localhost(const std::string & host) {
    unsigned char buf[16];
    if (host == "localhost" || inet_pton(AF_INET, host.c_str(), buf) == 1) {
        return true;
    }
    return host.size() > 2 && host.front() == '[' && host.back() == ']' && inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) == 1;
}

// What the Origin policy (http_options::cors_origins) makes of a request.
enum class origin_verdict {
    absent,    // no Origin header: not a browser page's request (curl, SDKs)
    own,       // a page of this server's own address, as the request's Host names it by an address or localhost
    listed,    // --cors-origin allows it: its answers carry CORS headers
    refused,   // 403
};

// Own address only by an address or localhost: a DNS name may be an
// attacker's, rebound to this server's address, whose pages the browser
// would then let read the answers.
origin_verdict judge_origin(const httplib::Request & req, const std::vector<std::string> & allowed) {
    if (!req.has_header("Origin")) {
        return origin_verdict::absent;
    }
    const std::string origin = lower(req.get_header_value("Origin"));
    for (const std::string & a : allowed) {
        if (a == "*" || a == origin) {
            return origin_verdict::listed;
        }
    }
    const std::string scheme = "http://"; // this server speaks plain HTTP only
    std::string o_host, o_port, h_host, h_port;
    if (origin.compare(0, scheme.size(), scheme) == 0 && split_host_port(origin.substr(scheme.size()), "80", o_host, o_port) &&
        split_host_port(req.get_header_value("Host"), "80", h_host, h_port) && o_host == h_host && o_port == h_port &&
        is_address_or_localhost(o_host)) {
        return origin_verdict::own;
    }
    return origin_verdict::refused;
}

api_error origin_refused(const std::string & origin) {
    return api_error(403, "permission_error",
                     "requests from web pages of " + origin + " are refused; start the server with --cors-origin " + origin +
                         " to allow them",
                     "", "origin_not_allowed");
}

// Compares without an early exit, so the time taken does not tell how much of the key matched.
bool same_secret(const std::string & a, const std::string & b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) {
        diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
    }
    return diff == 0;
}

// Answers a request the scheduler refused (before it ran).
api_error rejection(const request_channel & c) {
    switch (c.status()) {
        case SPECDEC_STATUS_QUEUE_FULL:
            return unavailable("the server is busy: every slot is taken and the waiting queue is full; retry later", "queue_full");
        case SPECDEC_STATUS_CONTEXT_FULL:
        case SPECDEC_STATUS_PROMPT_TOO_LONG:
            return invalid_request(c.message(), "prompt", "context_length_exceeded");
        case SPECDEC_STATUS_INVALID_ARGUMENT:
        case SPECDEC_STATUS_UNREPRESENTABLE_TEXT: // a grammar prefix
            return invalid_request(c.message());
        default:
            return server_error(c.message());
    }
}

using steady = std::chrono::steady_clock;

// The connection a thread serves; the pre-routing handler moves its read
// deadline from the headers' to the body's (a connection is served on one
// thread from start to end).
class deadline_stream;
thread_local deadline_stream * t_stream = nullptr;

// What a client has done to its connection, as far as the socket shows
// without a write. A FIN reads as end of file whether the client shut down
// only its write side (a half-close: it still reads the answer) or closed
// the socket, so end of file alone is `half_closed`; only a write tells the
// two apart (a closed client's kernel answers it with a reset).
enum class peer_state {
    open,        // it may still send (or sent bytes not read yet: a pipelined request)
    half_closed, // end of file: it sends nothing more, and may or may not read
    gone,        // the connection was reset, or a write to it failed
};

// A connection's socket for httplib, whose reads end at a deadline: a
// request's line and headers, then its body, must arrive within theirs
// whatever the pace of the bytes, so that a client trickling a byte at a
// time cannot hold a connection thread (httplib's own stream bounds each
// read only). Writes wait at most `per_write` each, as httplib's do.
class deadline_stream final : public httplib::Stream {
public:
    deadline_stream(socket_t sock, steady::time_point deadline, std::chrono::milliseconds per_read,
                    std::chrono::milliseconds per_write)
        : sock_(sock), deadline_(deadline), per_read_(per_read), per_write_(per_write) {}

    void set_deadline(steady::time_point deadline) { deadline_ = deadline; }

    // Without blocking; see peer_state.
    peer_state peer() const {
        if (write_failed_) {
            return peer_state::gone;
        }
        pollfd p{sock_, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) {
            return peer_state::open;
        }
        if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) { // a reset (or both directions shut)
            return peer_state::gone;
        }
        char c = 0;
        const ssize_t n = recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) {
            return peer_state::open;
        }
        if (n == 0) {
            return peer_state::half_closed;
        }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? peer_state::open : peer_state::gone;
    }
    // Bytes of the request read, and of the answer written, so far.
    size_t n_read() const { return n_read_; }
    size_t n_written() const { return n_written_; }

    bool is_readable() const override { return off_ < size_; }
    bool wait_readable() const override {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - steady::now());
        return left.count() > 0 && poll_for(POLLIN, std::min(left, per_read_));
    }
    bool wait_writable() const override { return poll_for(POLLOUT, per_write_); }
    // httplib asks before each piece of a stream: a half-closed client is still there.
    bool is_peer_alive() const override { return peer() != peer_state::gone; }

    ssize_t read(char * ptr, size_t size) override {
        if (off_ == size_) {
            if (!wait_readable()) {
                error_ = httplib::Error::Timeout;
                return -1;
            }
            ssize_t n = 0;
            do {
                n = recv(sock_, buf_, sizeof(buf_), 0);
            } while (n < 0 && errno == EINTR);
            if (n <= 0) {
                error_ = n == 0 ? httplib::Error::ConnectionClosed : httplib::Error::Read;
                return n;
            }
            off_ = 0;
            size_ = static_cast<size_t>(n);
            n_read_ += size_;
        }
        const size_t k = std::min(size, size_ - off_);
        std::memcpy(ptr, buf_ + off_, k);
        off_ += k;
        return static_cast<ssize_t>(k);
    }
    ssize_t write(const char * ptr, size_t size) override {
        if (!wait_writable()) {
            write_failed_ = true;
            return -1;
        }
        ssize_t n = 0;
        do {
            n = send(sock_, ptr, size, MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            write_failed_ = true;
        } else {
            n_written_ += static_cast<size_t>(n);
        }
        return n;
    }
    void get_remote_ip_and_port(std::string & ip, int & port) const override { address_of(getpeername, ip, port); }
    void get_local_ip_and_port(std::string & ip, int & port) const override { address_of(getsockname, ip, port); }
    socket_t socket() const override { return sock_; }
    time_t duration() const override {
        return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - started_).count();
    }
    const char * buffered_data(size_t & size) const override {
        size = size_ - off_;
        return size > 0 ? buf_ + off_ : nullptr;
    }
    void consume_buffered(size_t size) override { off_ += std::min(size, size_ - off_); }

private:
    bool poll_for(short events, std::chrono::milliseconds timeout) const {
        pollfd p{sock_, events, 0};
        int r = 0;
        do {
            r = poll(&p, 1, static_cast<int>(timeout.count()));
        } while (r < 0 && errno == EINTR);
        return r > 0;
    }
    void address_of(int (*get)(int, sockaddr *, socklen_t *), std::string & ip, int & port) const {
        sockaddr_storage a{};
        socklen_t n = sizeof(a);
        char host[NI_MAXHOST] = "";
        char serv[NI_MAXSERV] = "";
        if (get(sock_, reinterpret_cast<sockaddr *>(&a), &n) == 0 &&
            getnameinfo(reinterpret_cast<sockaddr *>(&a), n, host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
            ip = host;
            port = std::atoi(serv);
        }
    }

    socket_t                        sock_;
    steady::time_point              deadline_;
    const std::chrono::milliseconds per_read_;
    const std::chrono::milliseconds per_write_;
    const steady::time_point        started_ = steady::now();
    char                            buf_[4096];
    size_t                          off_ = 0;
    size_t                          size_ = 0;
    size_t                          n_read_ = 0;
    size_t                          n_written_ = 0;
    bool                            write_failed_ = false;
};

// Writes all of `bytes` (each write waits at most the stream's write deadline); false when one fails.
bool write_all(httplib::Stream & strm, const std::string & bytes) {
    for (size_t off = 0; off < bytes.size();) {
        const ssize_t n = strm.write(bytes.data() + off, bytes.size() - off);
        if (n <= 0) {
            return false;
        }
        off += static_cast<size_t>(n);
    }
    return true;
}

// Whether the client of a request still being answered is gone. At the
// first end of file it sees (peer_state::half_closed) it writes `probe`,
// bytes its answer may carry before it and that a half-closed client reads
// past: a client that closed its socket answers them with a reset, seen
// here at a later call, and a half-closed one gets its whole answer.
// `probed` is the request's own flag, false at first. A null connection is never gone.
bool client_gone(const deadline_stream * conn, bool & probed, const std::function<bool()> & probe) {
    if (conn == nullptr) {
        return false;
    }
    const peer_state p = conn->peer();
    if (p == peer_state::half_closed && !probed) {
        probed = true;
        return !probe() || conn->peer() == peer_state::gone;
    }
    return p == peer_state::gone;
}

// Connection threads, started as connections need them, up to `max`: a
// connection waiting in the queue always has a thread coming while fewer
// than `max` run. (httplib's pool starts a thread only when none is idle at
// the moment a connection arrives, so a burst of slow connections queued a
// /health probe behind them.) Past `max`, connections wait in arrival order.
class connection_pool final : public httplib::TaskQueue {
public:
    explicit connection_pool(size_t max) : max_(max) {}
    ~connection_pool() override { shutdown(); }

    bool enqueue(std::function<void()> fn) override {
        std::lock_guard<std::mutex> lock(m_);
        if (stopping_) {
            return false;
        }
        jobs_.push_back(std::move(fn));
        if (n_idle_ < jobs_.size() && threads_.size() < max_) {
            threads_.emplace_back([this] { work(); });
        }
        cv_.notify_one();
        return true;
    }
    // Runs the queued connections, then joins every thread.
    void shutdown() override {
        {
            std::lock_guard<std::mutex> lock(m_);
            stopping_ = true;
        }
        cv_.notify_all();
        for (std::thread & t : threads_) {
            if (t.joinable()) {
                t.join();
            }
        }
    }

private:
    void work() {
        for (;;) {
            std::function<void()> fn;
            {
                std::unique_lock<std::mutex> lock(m_);
                ++n_idle_;
                cv_.wait(lock, [this] { return !jobs_.empty() || stopping_; });
                --n_idle_;
                if (jobs_.empty()) {
                    return; // stopping, nothing left
                }
                fn = std::move(jobs_.front());
                jobs_.pop_front();
            }
            fn();
        }
    }

    const size_t                       max_;
    std::mutex                         m_;
    std::condition_variable            cv_;
    std::deque<std::function<void()>>  jobs_;
    std::vector<std::thread>           threads_; // grows under m_; joined by shutdown()
    size_t                             n_idle_ = 0; // threads waiting for a job
    bool                               stopping_ = false;
};

} // namespace

// httplib's server with its connection loop replaced: each request's reads
// end at deadlines (deadline_stream), an idle kept-alive connection closes
// after opt.keep_alive_s, and a stopped server ends its connections between
// requests. Everything else (parsing, routing, responses) is httplib's.
class guarded_server final : public httplib::Server {
public:
    explicit guarded_server(const http_options & o) : opt_(o) {}

private:
    // Waits until the socket has bytes, it closes or `timeout` passes; a
    // kept-alive one (not `first`) also ends when the server stops (checked
    // every 100 ms), while a new one is still answered. True when there are bytes.
    bool wait_request(socket_t sock, std::chrono::milliseconds timeout, bool first) const {
        const auto until = steady::now() + timeout;
        while ((first || svr_sock_ != INVALID_SOCKET) && steady::now() < until) {
            pollfd p{sock, POLLIN, 0};
            const int r = poll(&p, 1, 100);
            if (r > 0) {
                return true;
            }
            if (r < 0 && errno != EINTR) {
                return false;
            }
        }
        return false;
    }

    bool process_and_close_socket(socket_t sock) override {
        const bool ok = serve_guarded([&] {
            std::string remote_ip, local_ip;
            int remote_port = 0, local_port = 0;
            bool served = false;
            for (size_t count = max_requests_per_connection; count > 0; --count) {
                const bool first = count == max_requests_per_connection;
                if (!wait_request(sock, std::chrono::seconds(first ? opt_.header_timeout_s : opt_.keep_alive_s), first)) {
                    break;
                }
                deadline_stream strm(sock, steady::now() + std::chrono::seconds(opt_.header_timeout_s),
                                     std::chrono::seconds(opt_.read_timeout_s), std::chrono::seconds(opt_.write_timeout_s));
                if (remote_ip.empty()) {
                    strm.get_remote_ip_and_port(remote_ip, remote_port);
                    strm.get_local_ip_and_port(local_ip, local_port);
                }
                t_stream = &strm;
                bool closed = false;
                served = process_request(strm, remote_ip, remote_port, local_ip, local_port,
                                         count == 1 || svr_sock_ == INVALID_SOCKET, closed, nullptr);
                t_stream = nullptr;
                // A deadline that passed in the request line: httplib answers nothing
                // there (it does in the headers and the body, and the error handler
                // makes that a 408 too). A connection that sent nothing is just closed.
                if (!served && strm.get_error() == httplib::Error::Timeout && strm.n_read() > 0 && strm.n_written() == 0) {
                    const std::string body = json_text(error_body(request_timeout()), -1);
                    const std::string answer = "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: " +
                                               std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
                    write_all(strm, answer);
                }
                // A read that failed (a deadline passed, the peer closed) ends the connection:
                // httplib answered 400 if it could, and the stream may be mid-request.
                if (!served || closed || strm.get_error() != httplib::Error::Success) {
                    break;
                }
            }
            return served;
        });
        // The response out first, then the socket closed: half-close, read
        // what the peer still sends (briefly), close.
        shutdown(sock, SHUT_WR);
        char sink[4096];
        for (int i = 0; i < 16; ++i) {
            pollfd p{sock, POLLIN, 0};
            if (poll(&p, 1, 50) <= 0 || recv(sock, sink, sizeof(sink), 0) <= 0) {
                break;
            }
        }
        close(sock);
        return ok;
    }

    static constexpr size_t max_requests_per_connection = 100; // httplib's keep-alive default
    const http_options      opt_;
};

// Completions being answered: entered when a handler starts, left when its
// response (for a stream: its last chunk) is out.
class in_flight {
public:
    void enter() {
        std::lock_guard<std::mutex> lock(m_);
        ++n_;
    }
    void leave() {
        std::lock_guard<std::mutex> lock(m_);
        if (--n_ == 0) {
            cv_.notify_all();
        }
    }
    size_t count() {
        std::lock_guard<std::mutex> lock(m_);
        return n_;
    }
    bool wait_idle(std::chrono::milliseconds timeout) {
        std::unique_lock<std::mutex> lock(m_);
        return cv_.wait_for(lock, timeout, [this] { return n_ == 0; });
    }

private:
    std::mutex              m_;
    std::condition_variable cv_;
    size_t                  n_ = 0;
};

// Leaves at scope end unless released (a stream hands its place to the provider).
class flight_guard {
public:
    explicit flight_guard(in_flight & f) : f_(&f) { f_->enter(); }
    ~flight_guard() {
        if (f_ != nullptr) {
            f_->leave();
        }
    }
    flight_guard(const flight_guard &) = delete;
    flight_guard & operator=(const flight_guard &) = delete;
    in_flight * release() { return std::exchange(f_, nullptr); }

private:
    in_flight * f_;
};

struct http_server::impl {
    impl(service & s, const http_options & o) : svc(s), opt(o) {}

    service &             svc;
    http_options          opt;
    guarded_server        server{opt};
    std::atomic<bool>     shutting_down{false};
    in_flight             flights;
    std::atomic<uint64_t> next_id{1};
    const int64_t         started = static_cast<int64_t>(std::time(nullptr));
    std::mutex            seed_m;
    std::mt19937          seeds{std::random_device{}()};

    uint32_t random_seed() {
        std::lock_guard<std::mutex> lock(seed_m);
        return static_cast<uint32_t>(seeds());
    }

    void routes();
    bool authorized(const httplib::Request & req, httplib::Response & res) const;
    void completion(endpoint kind, const httplib::Request & req, httplib::Response & res);
    void stream(const std::shared_ptr<request_channel> & c, const response_info & info, httplib::Response & res,
                flight_guard & guard, deadline_stream * conn, std::shared_ptr<const chat_parser> parser);
};

std::string normalize_origin(const std::string & origin) {
    if (origin == "*" || origin == "null") {
        return origin;
    }
    std::string o = lower(origin);
    if (!o.empty() && o.back() == '/') {
        o.pop_back();
    }
    const size_t sep = o.find("://");
    if (sep == std::string::npos) {
        return "";
    }
    const std::string scheme = o.substr(0, sep);
    const std::string rest = o.substr(sep + 3);
    std::string host, port;
    const bool ok = (scheme == "http" || scheme == "https") && rest.find_first_of("/?#@ ") == std::string::npos &&
                    split_host_port(rest, "80", host, port);
    return ok ? o : "";
}

http_server::http_server(service & svc, const http_options & options) : impl_(std::make_unique<impl>(svc, options)) {
    impl_->routes();
}

http_server::~http_server() = default;

int http_server::bind() {
    httplib::Server & s = impl_->server;
    const int port = impl_->opt.port == 0 ? s.bind_to_any_port(impl_->opt.host)
                                          : (s.bind_to_port(impl_->opt.host, impl_->opt.port) ? impl_->opt.port : -1);
    if (port <= 0) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot listen on " + impl_->opt.host + ":" + std::to_string(impl_->opt.port) +
                                                          " (in use, or not an address of this machine)");
    }
    return port;
}

void http_server::run() {
    impl_->server.listen_after_bind();
}

void http_server::begin_shutdown() {
    impl_->shutting_down.store(true);
}

bool http_server::wait_idle(std::chrono::milliseconds timeout) {
    return impl_->flights.wait_idle(timeout);
}

void http_server::stop() {
    impl_->server.stop();
}

// Connection threads beyond what completions hold: /health, /metrics, /v1/models and the 503s past the bound.
constexpr size_t reserve_threads = 16;

void http_server::impl::routes() {
    // Connections beyond the most threads wait in the pool's queue, which is
    // unbounded so that every request gets a status.
    const size_t n_max = 2 * std::max<size_t>(opt.max_completions, 1) + reserve_threads;
    server.new_task_queue = [n_max] { return new connection_pool(n_max); };
    server.set_payload_max_length(opt.max_body);
    // SO_REUSEADDR only: httplib's default, SO_REUSEPORT, would let a second
    // server bind the same port and take half of the connections.
    // Accepted connections inherit the listening socket's send buffer.
    server.set_socket_options([send_buffer = opt.send_buffer](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
        if (send_buffer > 0) {
            setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof(send_buffer));
        }
    });

    // Runs once the headers are in, before the body is read: the cheapest
    // checks first (the origin, body size, API key, the engine's bound), so
    // that no refused request costs a body read, a parse or a tokenization.
    server.set_pre_routing_handler([this](const httplib::Request & req, httplib::Response & res) {
        const origin_verdict origin = judge_origin(req, opt.cors_origins);
        if (origin == origin_verdict::refused) {
            send_error(res, origin_refused(req.get_header_value("Origin")));
            return httplib::Server::HandlerResponse::Handled;
        }
        // A CORS preflight (a browser asks before its request; it sends no API key) or a plain OPTIONS.
        if (req.method == "OPTIONS") {
            res.status = 204;
            res.set_header("Allow", "GET, POST, OPTIONS");
            if (origin == origin_verdict::listed) {
                res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                if (req.has_header("Access-Control-Request-Headers")) { // Authorization among them: "*" would not cover it
                    res.set_header("Access-Control-Allow-Headers", req.get_header_value("Access-Control-Request-Headers"));
                }
                res.set_header("Access-Control-Max-Age", "600");
            }
            return httplib::Server::HandlerResponse::Handled;
        }
        const bool completion = req.method == "POST" && (req.path == "/v1/completions" || req.path == "/v1/chat/completions");
        if (completion && req.get_header_value_u64("Content-Length") > opt.max_body) {
            send_error(res, payload_too_large());
            return httplib::Server::HandlerResponse::Handled;
        }
        if (!authorized(req, res)) {
            return httplib::Server::HandlerResponse::Handled;
        }
        if (t_stream != nullptr) { // the headers are in: the body has its own deadline
            t_stream->set_deadline(steady::now() + std::chrono::seconds(opt.body_timeout_s));
        }
        if (completion && !shutting_down.load() && flights.count() >= opt.max_completions) {
            svc.stats->add_rejected();
            send_error(res, unavailable("the server is busy: every slot is taken and the waiting queue is full; retry later",
                                        "queue_full"));
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    // Every answer to a listed origin (errors, streams and preflights too) says the page may read it.
    server.set_post_routing_handler([this](const httplib::Request & req, httplib::Response & res) {
        if (judge_origin(req, opt.cors_origins) != origin_verdict::listed) {
            return;
        }
        const bool any = std::find(opt.cors_origins.begin(), opt.cors_origins.end(), "*") != opt.cors_origins.end();
        res.set_header("Access-Control-Allow-Origin", any ? "*" : req.get_header_value("Origin"));
        res.set_header("Access-Control-Expose-Headers", "Retry-After");
        res.set_header("Vary", "Origin");
    });
    // Statuses httplib sets by itself (no route, body over the limit, bad framing) get an OpenAI body too.
    server.set_error_handler([](const httplib::Request &, httplib::Response & res) {
        if (!res.body.empty()) {
            return;
        }
        // httplib answers 400 when a read fails, a deadline's included.
        if (res.status == 400 && t_stream != nullptr && t_stream->get_error() == httplib::Error::Timeout) {
            send_error(res, request_timeout());
        } else if (res.status == 413) {
            send_error(res, payload_too_large());
        } else if (res.status == 404) {
            send_error(res, api_error(404, "invalid_request_error", "no such route", "", "not_found"));
        } else {
            send_error(res, api_error(res.status, res.status >= 500 ? "server_error" : "invalid_request_error",
                                      httplib::status_message(res.status), "", ""));
        }
    });
    server.set_exception_handler([](const httplib::Request &, httplib::Response & res, std::exception_ptr ep) {
        std::string what = "unexpected failure";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception & e) {
            what = e.what();
        } catch (...) {
        }
        send_error(res, server_error(what));
    });
    if (svc.verbosity >= 1) {
        server.set_logger([](const httplib::Request & req, const httplib::Response & res) {
            std::fprintf(stderr, "specdec serve: %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
        });
    }

    server.Get("/health", [this](const httplib::Request &, httplib::Response & res) {
        if (shutting_down.load()) {
            res.status = 503;
            res.set_content(R"({"status":"shutting down"})", "application/json");
            return;
        }
        res.set_content(R"({"status":"ok"})", "application/json");
    });
    server.Get("/v1/models", [this](const httplib::Request &, httplib::Response & res) {
        const nlohmann::json j = {
            {"object", "list"},
            {"data", nlohmann::json::array({{{"id", svc.model_id}, {"object", "model"}, {"created", started}, {"owned_by", "specdec"}}})},
        };
        res.set_content(json_text(j, -1), "application/json");
    });
    server.Get("/metrics", [this](const httplib::Request &, httplib::Response & res) {
        res.set_content(svc.stats->render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    server.Post("/v1/completions", [this](const httplib::Request & req, httplib::Response & res) {
        completion(endpoint::completions, req, res);
    });
    server.Post("/v1/chat/completions", [this](const httplib::Request & req, httplib::Response & res) {
        completion(endpoint::chat, req, res);
    });
}

// Every route but /health needs the API key when one is set; false: answered 401.
bool http_server::impl::authorized(const httplib::Request & req, httplib::Response & res) const {
    if (opt.api_key.empty() || req.path == "/health") {
        return true;
    }
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.compare(0, prefix.size(), prefix) == 0 && same_secret(auth.substr(prefix.size()), opt.api_key)) {
        return true;
    }
    send_error(res, api_error(401, "authentication_error",
                              auth.empty() ? "an API key is required: send Authorization: Bearer KEY" : "the API key is not valid",
                              "", "invalid_api_key"));
    return false;
}

void http_server::impl::completion(endpoint kind, const httplib::Request & req, httplib::Response & res) {
    flight_guard guard(flights);
    deadline_stream * conn = t_stream; // this request's connection: the handler runs on its thread
    try {
        if (shutting_down.load()) {
            svc.stats->add_rejected();
            throw unavailable("the server is shutting down", "shutting_down");
        }
        request_limits limits;
        limits.model_id = svc.model_id;
        limits.strict_model = svc.strict_model;
        limits.n_ctx = svc.n_ctx;
        parsed_request r = parse_request(kind, req.body, limits);
        // No position holds more than max_prompt_bytes / n_ctx bytes of text:
        // a longer text cannot fit, and is refused before it is templated or tokenized.
        size_t n_text = r.prompt.size();
        for (const chat_message & m : r.messages) {
            n_text += m.content.size() + m.reasoning_content.size();
            for (const tool_call & call : m.tool_calls) {
                n_text += call.name.size() + call.arguments.size();
            }
        }
        for (const tool_function & f : r.tools.functions) {
            n_text += f.name.size() + f.description.size() + f.parameters.size();
        }
        // Each message takes a position at least (its role's marker), and the
        // template engine's time grows with their number, under a shared lock.
        if (r.messages.size() >= static_cast<size_t>(svc.n_ctx)) {
            throw invalid_request("the request has " + std::to_string(r.messages.size()) + " messages; the context holds " +
                                      std::to_string(svc.n_ctx) + " positions per request (-c), and each message takes one at least",
                                  "messages", "context_length_exceeded");
        }
        if (svc.max_prompt_bytes > 0 && n_text > svc.max_prompt_bytes) {
            throw invalid_request("the prompt has " + std::to_string(n_text) + " bytes of text; the context holds " +
                                      std::to_string(svc.n_ctx) + " positions per request (-c), which no text longer than " +
                                      std::to_string(svc.max_prompt_bytes) + " bytes fits",
                                  kind == endpoint::chat ? "messages" : "prompt", "context_length_exceeded");
        }

        std::string text = r.prompt;
        chat_prompt chat; // its grammar triggers are borrowed until the request is admitted
        if (kind == endpoint::chat) {
            if (!r.tools.functions.empty() && r.tools.choice != tool_choice::none && !svc.chat->writes_tool_calls()) {
                throw invalid_request("this model's chat template writes no tool calls, so its tools cannot be called; send "
                                      "'tool_choice': \"none\" or no tools",
                                      "tools", "unsupported_parameter");
            }
            const chat_options options = chat_options_for(r, svc.chat_defaults);
            try {
                chat = svc.chat->apply(r.messages, r.tools, options);
            } catch (const std::exception & e) {
                throw invalid_request(e.what(), r.tools.functions.empty() ? "messages" : "tools");
            }
            text = chat.prompt;
            // The tool-call format's grammar and stop strings (parse_request refuses a grammar of the client's with them).
            if (!chat.grammar.empty()) {
                r.grammar = chat.grammar;
            }
            for (const std::string & t : chat.grammar_triggers) {
                r.grammar_triggers.push_back(t.c_str());
            }
            r.grammar_prefix = chat.grammar_prefix;
            // The engine tracks the reasoning block where a budget or a lazy grammar needs it, as llama-server does.
            if (r.reasoning_budget.value_or(-1) >= 0 && chat.reasoning_end.empty()) {
                throw invalid_request("this model's chat template has no reasoning markers llama.cpp recognises, so a reasoning "
                                      "budget cannot apply",
                                      "reasoning_budget_tokens", "unsupported_parameter");
            }
            if (!chat.reasoning_end.empty() && (options.reasoning_budget >= 0 || !chat.grammar_triggers.empty())) {
                r.reasoning_start = chat.reasoning_start;
                r.reasoning_end = chat.reasoning_end;
                r.reasoning_prefix = chat.generation_prompt;
                r.reasoning_budget = options.reasoning_budget;
                r.reasoning_budget_message = options.reasoning_budget_message;
            }
            for (const std::string & s : chat.stops) {
                if (std::find(r.stop.begin(), r.stop.end(), s) == r.stop.end()) {
                    r.stop.push_back(s);
                }
            }
        }
        std::vector<llama_token> prompt;
        try {
            prompt = tokenize(svc.model, text, kind == endpoint::chat); // templates spell special tokens as text
        } catch (const specdec::error & e) {
            throw invalid_request(e.what(), kind == endpoint::chat ? "messages" : "prompt");
        }
        if (prompt.empty()) {
            throw invalid_request("the prompt is empty (it has no tokens)", "prompt");
        }
        if (prompt.size() >= static_cast<size_t>(svc.n_ctx)) {
            throw invalid_request("the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                                      std::to_string(svc.n_ctx) + " per request (-c), so at most " +
                                      std::to_string(svc.n_ctx - 1) + " leave room for one token",
                                  kind == endpoint::chat ? "messages" : "prompt", "context_length_exceeded");
        }
        if (r.json_schema) {
            try {
                r.grammar = json_schema_grammar(*r.json_schema);
            } catch (const std::exception & e) {
                throw invalid_request(std::string("the JSON schema cannot be turned into a grammar: ") + e.what(),
                                      r.json_schema_field);
            }
        }
        const std::vector<llama_token> echo_tokens = r.echo ? prompt : std::vector<llama_token>();
        const specdec::request_params params = to_engine_params(r, svc.n_ctx, random_seed(), svc.n_draft, svc.accept);
        // The grammar is parsed here, on this connection's thread, so that a bad
        // one never reaches the engine's thread (which parses it again).
        if (specdec_logit_shaping_validate(llama_model_get_vocab(svc.model), &params) != SPECDEC_STATUS_OK) {
            const std::string field = !chat.grammar.empty() ? "tools"
                                      : r.json_schema     ? r.json_schema_field
                                      : !r.grammar.empty() ? "grammar"
                                                           : "logit_bias";
            throw invalid_request(specdec_last_error(), field);
        }
        auto c = std::make_shared<request_channel>(std::move(prompt), params, r.stop);
        if (!svc.sched->submit(c)) {
            svc.stats->add_rejected();
            throw unavailable("the server is shutting down", "shutting_down");
        }
        while (c->wait_admission(1s) == request_channel::state::pending) {
        }
        if (c->wait_admission(0ms) == request_channel::state::rejected) {
            throw rejection(*c);
        }
        response_info info;
        info.kind = kind;
        info.id = (kind == endpoint::completions ? "cmpl-" : "chatcmpl-") + std::to_string(next_id.fetch_add(1));
        info.created = static_cast<int64_t>(std::time(nullptr));
        info.model = svc.model_id;
        info.strategy = svc.strategy;
        info.accept = accept_mode_name(accept_ran(params));
        info.n_top_logprobs = r.n_top_logprobs;
        info.include_usage = r.include_usage;
        if (r.echo) {
            info.echo_text = &r.prompt;
            info.echo_tokens = &echo_tokens;
        }
        info.piece = [vocab = llama_model_get_vocab(svc.model)](llama_token t) { return token_text(vocab, t); };
        if (r.stream) {
            stream(c, info, res, guard, conn, chat.parser);
            return;
        }
        // A half-closed client is answered; one that closed is probed with an
        // interim 102 (HTTP/1.1 clients read past 1xx answers; an HTTP/1.0
        // one can get none, and is found gone only when its answer is written).
        const bool interim_allowed = req.version == "HTTP/1.1";
        std::string ignored;
        bool cancelled = false;
        bool probed = false;
        while (!c->wait_output(poll_interval, ignored)) {
            ignored.clear();
            if (!cancelled && client_gone(conn, probed, [&] {
                    return !interim_allowed || write_all(*conn, "HTTP/1.1 102 Processing\r\n\r\n");
                })) {
                svc.sched->cancel(c); // the client went away; its finished event follows
                cancelled = true;
            }
        }
        const specdec::request_result & out = c->result();
        if (out.output.stop == SPECDEC_STOP_CANCELLED) {
            throw unavailable("the request was cancelled: the server is shutting down", "shutting_down");
        }
        if (out.output.stop == SPECDEC_STOP_ERROR) {
            throw server_error("generation failed (run the server with -v for the reason)");
        }
        std::optional<parsed_answer> answer;
        if (chat.parser != nullptr) {
            answer = chat.parser->parse(out.output.text, false);
            name_tool_calls(*answer);
            info.answer = &*answer;
        }
        res.set_content(json_text(response_body(info, {&out, c->n_prompt()}), -1), "application/json");
    } catch (const api_error & e) {
        send_error(res, e);
    } catch (const specdec::error & e) {
        send_error(res, e.kind() == SPECDEC_STATUS_KIND_CONFIGURATION ? invalid_request(e.what()) : server_error(e.what()));
    } catch (const std::exception & e) {
        send_error(res, server_error(e.what()));
    }
}

// `conn`: the request's connection, which outlives the provider (httplib
// calls it on the connection's thread while it answers).
void http_server::impl::stream(const std::shared_ptr<request_channel> & c, const response_info & info_in, httplib::Response & res,
                               flight_guard & guard, deadline_stream * conn, std::shared_ptr<const chat_parser> parser) {
    struct state {
        bool          first = true;
        bool          done = false;
        bool          probed = false;  // client_gone's flag
        size_t        text_offset = 0; // of the next token with log-probabilities (completions)
        std::string   echo;            // the prompt's text, which the first chunk carries (echo)
        std::string   text;            // with a chat parser: the answer's text so far, read again at each piece
        answer_stream sent;            // and what its deltas sent
    };
    auto st = std::make_shared<state>();
    if (info_in.echo_text != nullptr) {
        st->echo = *info_in.echo_text;
    }
    response_info info = info_in; // the stream outlives the request's handler: no borrowed echo
    info.echo_text = nullptr;
    info.echo_tokens = nullptr;
    scheduler * sched = svc.sched;
    in_flight * flight = guard.release(); // left by the releaser, which httplib calls once the stream ends
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [c, info, st, sched, conn, parser](size_t, httplib::DataSink & sink) {
            try {
                std::string text = std::move(st->echo);
                st->echo.clear();
                specdec::sequence_result lp;
                const bool finished = c->wait_output(poll_interval, text, info.n_top_logprobs >= 0 ? &lp : nullptr);
                const bool carries = !text.empty() || !lp.tokens.empty();
                // With tools, what the answer reads as so far; once finished, all of it.
                std::optional<parsed_answer> answer;
                nlohmann::json delta = nlohmann::json::object();
                if (parser != nullptr && (carries || finished)) {
                    st->text += text;
                    answer = parser->parse(st->text, !finished);
                    if (answer) {
                        delta = answer_delta(st->sent, *answer, !finished);
                    }
                }
                if (parser != nullptr ? !delta.empty() || !lp.tokens.empty() : carries) {
                    const nlohmann::json logprobs =
                        lp.tokens.empty() ? nlohmann::json() : logprobs_body(info, token_logprobs::of(lp), st->text_offset);
                    const std::string ev = sse_event(parser != nullptr ? delta_chunk_body(info, std::move(delta), st->first, logprobs)
                                                                       : chunk_body(info, text, st->first, logprobs));
                    st->first = false;
                    if (!sink.write(ev.data(), ev.size())) {
                        sched->cancel(c); // the client went away
                        return false;
                    }
                } else if (!finished && client_gone(conn, st->probed, [&] { return sink.write(":\n\n", 3); })) {
                    sched->cancel(c); // probed with an SSE comment, which clients skip
                    return false;
                }
                if (!finished) {
                    return true;
                }
                const specdec::request_result & out = c->result();
                std::string tail;
                if (out.output.stop == SPECDEC_STOP_CANCELLED || out.output.stop == SPECDEC_STOP_ERROR) {
                    const api_error e = out.output.stop == SPECDEC_STOP_CANCELLED
                                            ? unavailable("the request was cancelled: the server is shutting down", "shutting_down")
                                            : server_error("generation failed (run the server with -v for the reason)");
                    tail = sse_event(error_body(e));
                } else {
                    response_info last = info;
                    if (answer) {
                        for (size_t i = 0; i < answer->tool_calls.size() && i < st->sent.calls.size(); ++i) {
                            answer->tool_calls[i].id = st->sent.calls[i].id;
                        }
                        last.answer = &*answer;
                    }
                    tail = sse_event(final_chunk_body(last, {&out, c->n_prompt()}));
                    if (info.include_usage) {
                        tail += sse_event(usage_chunk_body(info, {&out, c->n_prompt()}));
                    }
                }
                tail += sse_done();
                st->done = true;
                if (!sink.write(tail.data(), tail.size())) {
                    return false;
                }
                sink.done();
                return true;
            } catch (...) {
                sched->cancel(c);
                return false; // closes the connection: the stream cannot carry a status any more
            }
        },
        [c, st, sched, flight](bool success) {
            if (!success || !st->done) {
                sched->cancel(c); // a finished request is left alone
            }
            flight->leave();
        });
}

} // namespace cli::serve
