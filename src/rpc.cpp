// RPC servers as ggml devices, checked before llama.cpp sees them: llama.cpp
// v0.5.0 aborts the process when an RPC endpoint is malformed or does not
// answer, so each endpoint is parsed and a TCP connection is tried first.
#include "error.h"

#include "specdec/specdec.h"

#include "ggml-backend.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace specdec::detail {

namespace {

constexpr int connect_timeout_ms = 5000;

struct endpoint {
    std::string text; // "host:port" as given
    std::string host;
    std::string port;
};

std::vector<endpoint> parse_endpoints(const char * servers) {
    if (servers == nullptr || servers[0] == '\0') {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "no RPC server given; expected host:port[,host:port...]");
    }
    std::vector<endpoint> out;
    const std::string all(servers);
    size_t start = 0;
    while (start <= all.size()) {
        const size_t comma = std::min(all.find(',', start), all.size());
        const std::string text = all.substr(start, comma - start);
        const size_t colon = text.rfind(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "RPC server '", text, "' is not host:port");
        }
        const std::string port = text.substr(colon + 1);
        char * end = nullptr;
        const long p = std::strtol(port.c_str(), &end, 10);
        if (*end != '\0' || p < 1 || p > 65535) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "RPC server '", text, "' has no port in 1..65535");
        }
        out.push_back({text, text.substr(0, colon), port});
        start = comma + 1;
    }
    return out;
}

// Tries a TCP connection within connect_timeout_ms; throws IO_ERROR with the reason.
void probe(const endpoint & e) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo * found = nullptr;
    if (const int rc = getaddrinfo(e.host.c_str(), e.port.c_str(), &hints, &found); rc != 0) {
        fail(SPECDEC_STATUS_IO_ERROR, "RPC server '", e.text, "': cannot resolve '", e.host, "': ", gai_strerror(rc));
    }
    std::string reason = "no address";
    bool reached = false;
    for (addrinfo * a = found; a != nullptr && !reached; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            reason = std::strerror(errno);
            continue;
        }
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd pfd{fd, POLLOUT, 0};
            rc = poll(&pfd, 1, connect_timeout_ms);
            if (rc == 0) {
                reason = "no answer within " + std::to_string(connect_timeout_ms / 1000) + " s";
                rc = -1;
            } else if (rc > 0) {
                int err = 0;
                socklen_t len = sizeof(err);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                rc = err == 0 ? 0 : -1;
                if (err != 0) {
                    reason = std::strerror(err);
                }
            } else {
                reason = std::strerror(errno);
            }
        } else if (rc != 0) {
            reason = std::strerror(errno);
        }
        reached = rc == 0;
        close(fd);
    }
    freeaddrinfo(found);
    if (!reached) {
        fail(SPECDEC_STATUS_IO_ERROR, "cannot reach RPC server '", e.text, "': ", reason);
    }
}

} // namespace

} // namespace specdec::detail

namespace specdec {

void rpc_add_servers(const std::string & servers) {
    using namespace detail;
    const std::vector<endpoint> endpoints = parse_endpoints(servers.c_str());
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
    if (rpc == nullptr) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "this build has no RPC backend (configure with -DSPECDEC_RPC=ON)");
    }
    using add_server_fn = ggml_backend_reg_t (*)(const char * endpoint);
    auto add_server = reinterpret_cast<add_server_fn>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"));
    if (add_server == nullptr) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "the RPC backend does not offer ggml_backend_rpc_add_server");
    }
    for (const endpoint & e : endpoints) { // every one is checked before any is added
        probe(e);
    }
    for (const endpoint & e : endpoints) {
        ggml_backend_reg_t reg = add_server(e.text.c_str());
        if (reg == nullptr) {
            fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp could not add RPC server '", e.text, "'");
        }
        ggml_backend_register(reg);
    }
}

} // namespace specdec
