// The shim's configuration parser (ROCELAB_* variables): defaults, every
// accepted form, and a clear refusal naming the variable for bad input.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "verbs_shim/config.h"

namespace rocelab::verbs_shim {
namespace {

std::map<std::string, std::string>& env() {
  static std::map<std::string, std::string> e;
  return e;
}
const char* lookup(const char* name) {
  auto it = env().find(name);
  return it == env().end() ? nullptr : it->second.c_str();
}
std::optional<ShimConfig> parse(std::map<std::string, std::string> vars, std::string& error) {
  env() = std::move(vars);
  return parse_config(lookup, error);
}

TEST(ShimConfig, ZeroConfigurationIsOneDeviceOnAFreeLoopbackAddress) {
  std::string error;
  auto c = parse({}, error);
  ASSERT_TRUE(c) << error;
  ASSERT_EQ(c->devices.size(), 1u);
  EXPECT_EQ(c->devices[0].name, "rocelab0");
  EXPECT_FALSE(c->devices[0].ip);  // the transport picks 127.0.0.x
  EXPECT_EQ(c->mtu, 0u);  // 0: from the interface
  EXPECT_TRUE(c->pcap_path.empty());
  EXPECT_TRUE(c->events_path.empty());
  EXPECT_FALSE(c->wire_exact);  // UDP GSO by default
}

TEST(ShimConfig, WireExactIsOneDatagramPerPacket) {
  std::string error;
  auto c = parse({{"ROCELAB_WIRE_EXACT", "1"}}, error);
  ASSERT_TRUE(c) << error;
  EXPECT_TRUE(c->wire_exact);
  c = parse({{"ROCELAB_WIRE_EXACT", "0"}}, error);
  ASSERT_TRUE(c) << error;
  EXPECT_FALSE(c->wire_exact);
}

TEST(ShimConfig, DevicesWithAddressesMtuAndFiles) {
  std::string error;
  auto c = parse({{"ROCELAB_DEVICES", "a0,b_1"},
                  {"ROCELAB_IP", "198.18.0.1,198.18.0.2"},
                  {"ROCELAB_MTU", "4096"},
                  {"ROCELAB_PCAP", "/tmp/x.pcap"},
                  {"ROCELAB_EVENTS", "/tmp/x.events"}},
                 error);
  ASSERT_TRUE(c) << error;
  ASSERT_EQ(c->devices.size(), 2u);
  EXPECT_EQ(c->devices[1].name, "b_1");
  ASSERT_TRUE(c->devices[1].ip);
  EXPECT_EQ(c->devices[1].ip->to_string(), "198.18.0.2");
  EXPECT_EQ(c->mtu, 4096u);
  EXPECT_EQ(c->pcap_path, "/tmp/x.pcap");
  EXPECT_EQ(c->events_path, "/tmp/x.events");
}

TEST(ShimConfig, AnIpv6AddressIsTaken) {
  std::string error;
  auto c = parse({{"ROCELAB_IP", "fd00:77::1"}}, error);
  ASSERT_TRUE(c) << error;
  ASSERT_TRUE(c->devices[0].ip);
  EXPECT_TRUE(c->devices[0].ip->v6);
  EXPECT_EQ(c->devices[0].ip->to_string(), "fd00:77::1");
}

TEST(ShimConfig, AnIpv6LinkLocalAddressTakesItsInterface) {
  std::string error;
  auto c = parse({{"ROCELAB_IP", "fe80::77:1%lo"}}, error);
  ASSERT_TRUE(c) << error;
  ASSERT_TRUE(c->devices[0].ip);
  EXPECT_EQ(c->devices[0].ip->to_string(), "fe80::77:1");
  EXPECT_EQ(c->devices[0].scope, "lo");
  EXPECT_EQ(c->devices[0].scope_id, 1u);  // lo is interface 1
  c = parse({{"ROCELAB_IP", "fd00:77::1"}}, error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->devices[0].scope_id, 0u);
}

TEST(ShimConfig, CongestionControlIsOffUnlessAsked) {
  std::string error;
  auto off = parse({}, error);
  ASSERT_TRUE(off) << error;
  EXPECT_EQ(off->cc, cc::Algorithm::kNone);
  EXPECT_EQ(off->line_rate_bps, 100'000'000'000u);
  EXPECT_FALSE(off->cnp_interval_us);
  auto on = parse({{"ROCELAB_CC", "dcqcn"}, {"ROCELAB_LINE_RATE", "25G"}, {"ROCELAB_CNP_INTERVAL_US", "50"}}, error);
  ASSERT_TRUE(on) << error;
  EXPECT_EQ(on->cc, cc::Algorithm::kDcqcn);
  EXPECT_EQ(on->line_rate_bps, 25'000'000'000u);
  EXPECT_EQ(on->cnp_interval_us, 50u);
  auto plain = parse({{"ROCELAB_LINE_RATE", "2500000"}}, error);
  ASSERT_TRUE(plain) << error;
  EXPECT_EQ(plain->line_rate_bps, 2'500'000u);
}

TEST(ShimConfig, BadValuesAreRefusedNamingTheVariable) {
  const std::map<std::string, std::string> bad[] = {
      {{"ROCELAB_MTU", "1500"}},                        // not an IBTA path MTU
      {{"ROCELAB_MTU", "1024x"}},                       // trailing junk
      {{"ROCELAB_IP", "127.0.0.256"}},                  // not an address
      {{"ROCELAB_IP", "192.0.2.3/24"}},                 // a prefix, not an address
      {{"ROCELAB_IP", "fd00::zz"}},                     // not an IPv6 address
      {{"ROCELAB_IP", "127.0.0.1,127.0.0.2"}},          // more addresses than devices
      {{"ROCELAB_IP", "fe80::1"}},                      // link-local without its interface
      {{"ROCELAB_IP", "fe80::1%no-such-if0"}},          // an interface that is not there
      {{"ROCELAB_IP", "192.0.2.3%lo"}},                 // a scope on an address that takes none
      {{"ROCELAB_DEVICES", "a,a"}},                     // duplicate name
      {{"ROCELAB_DEVICES", "a b"}},                     // space in a name
      {{"ROCELAB_DEVICES", ","}},                       // no names at all
      {{"ROCELAB_DEVICES", "a,b,c,d,e,f,g,h,i"}},       // more than kMaxDevices
      {{"ROCELAB_DEVICES", std::string(64, 'n')}},      // longer than ibv_device::name
      {{"ROCELAB_CC", "dctcp"}},                        // not an algorithm we have
      {{"ROCELAB_LINE_RATE", "10T"}},                   // not a suffix we know
      {{"ROCELAB_LINE_RATE", "0"}},                     // no rate
      {{"ROCELAB_LINE_RATE", "999K"}},                  // below DCQCN's floor of 1 Mb/s
      {{"ROCELAB_LINE_RATE", "99999999999G"}},          // beyond 64 bits
      {{"ROCELAB_CNP_INTERVAL_US", "-1"}},              // not a count of microseconds
  };
  for (const auto& vars : bad) {
    std::string error;
    EXPECT_FALSE(parse(vars, error)) << vars.begin()->first << "=" << vars.begin()->second;
    EXPECT_NE(error.find(vars.begin()->first), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace rocelab::verbs_shim
