// rocelab_flood: a network attacker as a process of its own. It
// sends genuine RoCEv2 packets (correct ICRC, built with src/wire's encoder)
// from its own address to a victim, as fast as one UDP socket goes:
//   - RC RDMA WRITE Only to random QPNs (nobody has them: the victim must drop
//     and count each, drop_unknown_qp), and
//   - the same to the victim's connected QP, from the attacker's address, with
//     random PSNs and R_Keys (the QP takes packets only from its peer's
//     address: drop_source_address).
// Batches of 64 with sendmmsg on the Asio socket's handle (Asio does not
// batch); it stops after --count packets or --seconds, whichever comes first,
// and prints how many it sent and how fast. Used by tests/attack/flood.sh.
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <array>

#include "tests/attack/craft.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace asio = boost::asio;
using namespace rocelab;

namespace {

using attack::Rng;

// One RC WRITE Only of 64 bytes from src:sport to dst, its ICRC computed.
std::vector<std::byte> packet(const wire::IpAddr& src, uint16_t sport, const wire::IpAddr& dst, uint32_t qpn,
                              Rng& rng) {
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kRcWriteOnly;
  h.bth.dest_qpn = wire::Qpn(qpn);
  h.bth.psn = wire::Psn(static_cast<uint32_t>(rng.next()) & wire::kMask24);
  h.bth.ack_req = true;
  h.reth.va = rng.next();
  h.reth.rkey = static_cast<uint32_t>(rng.next());
  h.reth.dma_len = 64;
  std::vector<std::byte> payload(64, std::byte{0xA5});
  return attack::udp_payload(src, sport, dst, h, payload);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rocelab_flood: send a flood of genuine RoCEv2 packets at a victim"};
  std::string from, to;
  uint32_t victim_qpn = 0;
  uint64_t count = 1'000'000;
  double share = 0.5;
  double seconds = 1e9;
  app.add_option("--from", from, "the attacker's IPv4 address (bound, source port 0xC000)")->required();
  app.add_option("--to", to, "the victim's IPv4 address (UDP 4791)")->required();
  app.add_option("--qpn", victim_qpn, "the victim's connected QPN (0: random QPNs only)");
  app.add_option("--count", count, "packets to send")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--victim-share", share, "fraction of the packets to --qpn")->check(CLI::Range(0.0, 1.0));
  app.add_option("--seconds", seconds, "stop after this long at the latest")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  auto src = wire::IpAddr::parse(from), dst = wire::IpAddr::parse(to);
  if (!src || !dst || src->v6 || dst->v6) {
    std::fprintf(stderr, "rocelab_flood: --from and --to must be IPv4 addresses\n");
    return 2;
  }
  asio::io_context io;
  asio::ip::udp::socket sock(io);
  boost::system::error_code ec;
  sock.open(asio::ip::udp::v4(), ec);
  if (!ec) sock.bind({asio::ip::make_address_v4(src->v4_u32()), 0xC000}, ec);
  if (ec) {
    std::fprintf(stderr, "rocelab_flood: cannot bind %s:49152: %s\n", from.c_str(), ec.message().c_str());
    return 1;
  }
  // A ring of prebuilt packets (the QPNs and PSNs vary over it).
  Rng rng{0xF100D};
  std::vector<std::vector<std::byte>> ring;
  const size_t kRing = 4096;
  for (size_t i = 0; i < kRing; ++i) {
    const bool at_victim = victim_qpn != 0 && static_cast<double>(i) < share * kRing;
    uint32_t qpn = at_victim ? victim_qpn : static_cast<uint32_t>(0x100000 + rng.next() % 0xE00000);
    ring.push_back(packet(*src, 0xC000, *dst, qpn, rng));
    if (ring.back().empty()) return 1;
  }
  const asio::ip::udp::endpoint ep(asio::ip::make_address_v4(dst->v4_u32()), wire::kRoceV2Port);
  constexpr size_t kBatch = 64;
  std::array<mmsghdr, kBatch> msgs{};
  std::array<iovec, kBatch> iov{};
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(seconds));
  uint64_t sent = 0, refused = 0, i = 0;
  while (i < count && std::chrono::steady_clock::now() < deadline) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBatch, count - i));
    for (size_t k = 0; k < n; ++k, ++i) {
      auto& p = ring[(i * 2654435761u) % kRing];
      iov[k] = {p.data(), p.size()};
      msgs[k] = {};
      msgs[k].msg_hdr.msg_name = const_cast<void*>(static_cast<const void*>(ep.data()));
      msgs[k].msg_hdr.msg_namelen = static_cast<socklen_t>(ep.size());
      msgs[k].msg_hdr.msg_iov = &iov[k];
      msgs[k].msg_hdr.msg_iovlen = 1;
    }
    const int r = ::sendmmsg(sock.native_handle(), msgs.data(), static_cast<unsigned>(n), 0);
    if (r > 0) {
      sent += static_cast<uint64_t>(r);
      refused += n - static_cast<size_t>(r);
    } else {
      refused += n;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rocelab_flood: sent %llu packets in %.2f s (%.0f packets/s), %llu refused by the socket\n",
              static_cast<unsigned long long>(sent), s, static_cast<double>(sent) / s,
              static_cast<unsigned long long>(refused));
  return 0;
}
