// The steering program of a shared address (src/host/reuseport_program.h),
// run by the kernel: three real UDP sockets in one SO_REUSEPORT group on
// loopback, the program attached, and datagrams built by the wire codec
// (BTH, DETH, CM MADs as the CM sends them) land on the socket the program
// names. Bind order gives the indices: socket k has index k while none leaves.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <vector>

#include "host/reuseport_program.h"
#include "wire/bth.h"
#include "wire/cm_mad.h"
#include "wire/deth.h"
#include "wire/host_probe.h"
#include "test_packets.h"

namespace rocelab::host {
namespace {

using packets::to_qpn;

constexpr uint64_t kService = 0x0106000000004e20ull;  // rdma_cm RDMA_PS_TCP, port 20000
constexpr uint64_t kOtherService = 0x0106000000004e21ull;

class ReuseportGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int k = 0; k < 3; ++k) {
      const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(fd, 0);
      const int on = 1;
      ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on), 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = port_;  // 0 for the first: the kernel picks, the others join it
      ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
      socklen_t len = sizeof a;
      ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
      port_ = a.sin_port;
      socks_.push_back(fd);
    }
    tx_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(tx_, 0);
    // Slot 0 on index 2, slot 3 on index 1, the service on index 1; the rest on 0.
    const std::array<SlotRoute, 2> slots{{{0, 2}, {3, 1}}};
    const std::array<ServiceRoute, 1> services{{{kService, 1}}};
    ASSERT_FALSE(attach_steering(socks_[0], steering_program(slots, services, 0)));
  }
  void TearDown() override {
    for (int fd : socks_) ::close(fd);
    if (tx_ >= 0) ::close(tx_);
  }

  // Sends the datagram and returns the index of the socket it reached (-1: none in 1 s).
  int landing(const std::vector<std::byte>& d) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = port_;
    EXPECT_EQ(::sendto(tx_, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(d.size()));
    std::vector<pollfd> fds;
    for (int fd : socks_) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 1000) <= 0) return -1;
    int got = -1;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & POLLIN)) continue;
      std::array<std::byte, 512> buf;
      const ssize_t n = ::recv(fds[k].fd, buf.data(), buf.size(), 0);
      EXPECT_EQ(n, static_cast<ssize_t>(d.size()));
      EXPECT_EQ(got, -1) << "one datagram reached two sockets";
      got = static_cast<int>(k);
    }
    return got;
  }

  std::vector<int> socks_;
  int tx_ = -1;
  in_port_t port_ = 0;
};

// A CM MAD to the GSI as the CM sends it: BTH (UD SEND Only, DestQP 1), DETH, MAD, ICRC.
std::vector<std::byte> cm_packet(wire::CmMessage msg) {
  std::vector<std::byte> d(12 + 8 + 256 + 4);
  wire::BthWriter b(d.data());
  b.set_opcode(0x64);
  b.set_pkey(0xFFFF);
  b.set_dest_qpn(wire::Qpn(1));
  b.set_ack_req_psn(false, wire::Psn(0));
  wire::Deth{wire::kGsiQkey, wire::Qpn(1)}.store(d.data() + 12);
  auto n = wire::encode_cm_mad(std::span(d).subspan(20, 256), wire::make_cm_mad(1, std::move(msg)));
  EXPECT_TRUE(n.ok());
  return d;
}

TEST_F(ReuseportGroup, DataPacketsGoToTheSlotInTheirDestQpTopByte) {
  EXPECT_EQ(landing(to_qpn(0x000011)), 2);  // slot 0
  EXPECT_EQ(landing(to_qpn(0x00FFFF)), 2);
  EXPECT_EQ(landing(to_qpn(0x030011)), 1);  // slot 3
  EXPECT_EQ(landing(to_qpn(0x070011)), 0);  // slot 7 has no process: the default
  EXPECT_EQ(landing(to_qpn(0xFFFFFF)), 0);  // multicast QPN: the default
}

TEST_F(ReuseportGroup, AProbeGoesToTheIndexItNames) {
  for (uint8_t idx : {2, 0, 1}) {
    std::vector<std::byte> d(wire::kHostProbeLen);
    wire::put_host_probe({idx, 0x1234, 9},
                         std::span<std::byte, wire::kHostProbeLen>(d.data(), d.size()));
    EXPECT_EQ(landing(d), idx);
  }
}

TEST_F(ReuseportGroup, ReqsGoToTheListenerOfTheirServiceId) {
  wire::CmReq req;
  req.local_comm_id = 0x05000001;  // the requester's own block: not ours to steer by
  req.service_id = kService;
  EXPECT_EQ(landing(cm_packet(req)), 1);
  req.service_id = kOtherService;  // nobody listens: the owner answers with REJ
  EXPECT_EQ(landing(cm_packet(req)), 0);
  wire::CmSidrReq sidr;
  sidr.request_id = 0x00000042;
  sidr.service_id = kService;
  EXPECT_EQ(landing(cm_packet(sidr)), 1);
}

TEST_F(ReuseportGroup, RepliesGoToTheSlotThatOwnsTheirCommunicationId) {
  wire::CmRep rep;
  rep.local_comm_id = 0x01000001;   // the sender's
  rep.remote_comm_id = 0x03000002;  // ours: slot 3
  EXPECT_EQ(landing(cm_packet(rep)), 1);
  wire::CmDreq dreq;
  dreq.local_comm_id = 0x03000009;
  dreq.remote_comm_id = 0x00000004;  // slot 0
  EXPECT_EQ(landing(cm_packet(dreq)), 2);
  wire::CmRtu rtu;
  rtu.local_comm_id = 0x00000001;
  rtu.remote_comm_id = 0x09000001;  // slot 9: nobody
  EXPECT_EQ(landing(cm_packet(rtu)), 0);
  wire::CmSidrRep sidr_rep;  // by its Request ID, which the requester chose
  sidr_rep.request_id = 0x03000042;
  EXPECT_EQ(landing(cm_packet(sidr_rep)), 1);
}

TEST_F(ReuseportGroup, ATruncatedDatagramStillReachesOneSocket) {
  // Too short for the program's loads: the kernel's classic BPF returns 0,
  // index 0 here; whoever gets it counts it as malformed.
  std::vector<std::byte> d(3);
  EXPECT_EQ(landing(d), 0);
}

TEST(SteeringProgram, StaysWithinTheKernelsLimitAtTheMostServicesAndSlots) {
  std::vector<SlotRoute> slots;
  for (int s = 0; s < 255; ++s) slots.push_back({static_cast<uint8_t>(s), static_cast<uint32_t>(s)});
  std::vector<ServiceRoute> services;
  for (size_t k = 0; k < kMaxServiceRoutes + 10; ++k) services.push_back({kService + k, 1});
  const auto p = steering_program(slots, services, 0);
  EXPECT_LE(p.size(), static_cast<size_t>(BPF_MAXINSNS));
  // And the kernel takes it.
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const int on = 1;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_FALSE(attach_steering(fd, p));
  ::close(fd);
}

}  // namespace
}  // namespace rocelab::host
