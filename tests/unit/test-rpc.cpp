// specdec_rpc_add_servers refuses what llama.cpp would abort on, before
// llama.cpp sees it, and adds nothing when any endpoint is bad.
#include "specdec/specdec.h"

#include "ggml-backend.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace {

// A loopback port nothing listens on: bound, then closed again.
int closed_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
}

TEST(Rpc, MalformedEndpointsAreInvalidArguments) {
    for (const char * bad : {"", "localhost", ":50052", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:12ab",
                             "127.0.0.1:50052,"}) {
        EXPECT_EQ(specdec_rpc_add_servers(bad), SPECDEC_STATUS_INVALID_ARGUMENT) << "'" << bad << "'";
        EXPECT_NE(std::string(specdec_last_error()).find("RPC server"), std::string::npos) << specdec_last_error();
    }
    EXPECT_EQ(specdec_rpc_add_servers(nullptr), SPECDEC_STATUS_INVALID_ARGUMENT);
}

TEST(Rpc, UnreachableServerIsAnIoErrorAndAddsNothing) {
    const size_t devices = ggml_backend_dev_count();
    const std::string endpoint = "127.0.0.1:" + std::to_string(closed_port());
    EXPECT_EQ(specdec_rpc_add_servers(endpoint.c_str()), SPECDEC_STATUS_IO_ERROR);
    EXPECT_NE(std::string(specdec_last_error()).find("cannot reach RPC server '" + endpoint + "'"), std::string::npos)
        << specdec_last_error();
    EXPECT_EQ(ggml_backend_dev_count(), devices);
}

TEST(Rpc, UnresolvableHostIsAnIoError) {
    EXPECT_EQ(specdec_rpc_add_servers("no-such-host.invalid:50052"), SPECDEC_STATUS_IO_ERROR);
    EXPECT_NE(std::string(specdec_last_error()).find("cannot resolve"), std::string::npos) << specdec_last_error();
}

} // namespace
