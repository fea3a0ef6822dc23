// netdev_of and link_mtu: the interface holding an address (the GID's netdev)
// and its MTU (what the port's active MTU derives from), read against
// /sys/class/net.
#include "emu/transport/link_mtu.h"

#include <gtest/gtest.h>

#include <fstream>

#include "emu/verbs_types.h"

namespace rocelab::emu {
namespace {

uint32_t sysfs_mtu(const char* iface) {
  std::ifstream in(std::string("/sys/class/net/") + iface + "/mtu");
  uint32_t v = 0;
  in >> v;
  return v;
}

TEST(LinkMtu, LoopbackAddressesAreOnLo) {
  const uint32_t lo = sysfs_mtu("lo");
  ASSERT_GT(lo, 0u);
  auto exact = link_mtu(wire::IpAddr::v4(127, 0, 0, 1));  // assigned to lo
  ASSERT_TRUE(exact) << exact.error().message();
  EXPECT_EQ(*exact, lo);
  auto in_net = link_mtu(wire::IpAddr::v4(127, 0, 0, 9));  // in lo's 127.0.0.0/8
  ASSERT_TRUE(in_net) << in_net.error().message();
  EXPECT_EQ(*in_net, lo);
}

TEST(LinkMtu, TheNetdevOfALoopbackAddressIsLo) {
  std::ifstream in("/sys/class/net/lo/ifindex");
  uint32_t lo = 0;
  in >> lo;
  ASSERT_GT(lo, 0u);
  for (const auto& a : {wire::IpAddr::v4(127, 0, 0, 1), wire::IpAddr::v4(127, 0, 0, 9)}) {
    auto dev = netdev_of(a);
    ASSERT_TRUE(dev) << dev.error().message();
    EXPECT_EQ(dev->name, "lo");
    EXPECT_EQ(dev->ifindex, lo);
  }
  EXPECT_EQ(netdev_of(wire::IpAddr::v4(192, 0, 2, 77)).error(), std::errc::no_such_device);
}

TEST(LinkMtu, AnAddressOnNoInterfaceIsENODEV) {
  auto r = link_mtu(wire::IpAddr::v4(192, 0, 2, 77));  // in 192.0.2.0/24, but assigned nowhere here
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::no_such_device);
}

TEST(LinkMtu, ActiveMtuAsSoftRoceDerivesIt) {
  EXPECT_EQ(mtu_for_link(65536), Mtu::k4096);
  EXPECT_EQ(mtu_for_link(1500), Mtu::k1024);
  EXPECT_EQ(mtu_for_link(1104), Mtu::k1024);
  EXPECT_EQ(mtu_for_link(1103), Mtu::k512);
  EXPECT_EQ(mtu_for_link(0), Mtu::k256);
}

}  // namespace
}  // namespace rocelab::emu
