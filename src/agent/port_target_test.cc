// Tests for agent/port_target: /proc/net/tcp{,6} parsing (listening sockets only, their address,
// port and uid), the address to dial, and the resolution against a real listening socket of this
// process's uid.
#include "agent/port_target.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/unique_fd.h"

namespace gpupool::agent {
namespace {

TEST(PortTargetTest, ParsesListeningSockets) {
  const std::string v4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
      "inode\n"
      "   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 "
      "11 1 0 100 0 0 10 0\n"
      "   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
      "12 1 0 100 0 0 10 0\n"
      "   2: 0100007F:22B8 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1001        0 "
      "13 1 0 100 0 0 10 0\n";
  const std::vector<ListeningSocket> sockets = ParseListeningSockets(v4, false);
  ASSERT_EQ(sockets.size(), 2u) << "an established connection is no listener";
  EXPECT_EQ(sockets[0].address, "127.0.0.1");
  EXPECT_EQ(sockets[0].port, 8888);
  EXPECT_EQ(sockets[0].uid, 1001u);
  EXPECT_EQ(sockets[1].address, "0.0.0.0");
  EXPECT_EQ(sockets[1].port, 8080);
  const std::string v6 =
      "  sl  local_address                         remote_address                        st\n"
      "   0: 00000000000000000000000001000000:1770 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000  1002        0 14 1 0 100 0 0 10 0\n";
  const std::vector<ListeningSocket> six = ParseListeningSockets(v6, true);
  ASSERT_EQ(six.size(), 1u);
  EXPECT_EQ(six[0].address, "::1");
  EXPECT_EQ(six[0].port, 6000);
  EXPECT_EQ(six[0].uid, 1002u);
}

// A socket this test listens on is among the host's listening sockets, with its port and uid; a
// connected one is not.
TEST(PortTargetTest, ListsThisHostsListeningSockets) {
  const UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener.get(), 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t port = ntohs(addr.sin_port);
  const UniqueFd client(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);

  int found = 0;
  for (const ListeningSocket& s : ListListeningSockets(false)) {
    if (s.port != port) continue;
    ++found;
    EXPECT_EQ(s.address, "127.0.0.1");
    EXPECT_EQ(s.uid, getuid());
  }
  EXPECT_EQ(found, 1);
  for (const ListeningSocket& s : ListListeningSockets(true)) EXPECT_NE(s.port, port);
}

TEST(PortTargetTest, DialAddress) {
  EXPECT_EQ(DialAddress("0.0.0.0"), "127.0.0.1");
  EXPECT_EQ(DialAddress("::"), "::1");
  EXPECT_EQ(DialAddress("10.1.2.3"), "10.1.2.3");
}

}  // namespace
}  // namespace gpupool::agent
