// Tests for agent/port_target: /proc/net/tcp{,6} parsing (listening sockets only, their address,
// port and uid), the address to dial, and the resolution against a real listening socket of this
// process's uid.
#include "agent/port_target.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

TEST(PortTargetTest, DialAddress) {
  EXPECT_EQ(DialAddress("0.0.0.0"), "127.0.0.1");
  EXPECT_EQ(DialAddress("::"), "::1");
  EXPECT_EQ(DialAddress("10.1.2.3"), "10.1.2.3");
}

}  // namespace
}  // namespace gpupool::agent
