// rocelab_attacker: a crafted-packet attacker as a process of its own,
// against an unmodified program (an ib_write_bw server under `rocelab run`).
// It knows what that server printed (its QPN, R_Key and VA, and its peer's
// initial PSN, which is the server's first expected PSN)
// and sends, --rounds times each, genuine RoCEv2 packets (built with
// src/wire's encoder, correct ICRC unless the attack is a bad ICRC):
//
//   from its own address (--from):
//     bad_icrc        a valid WRITE to the server's QP, ICRC flipped
//     truncated       the first 20 bytes of a WRITE (BTH + half a RETH)
//     random_qpn      WRITEs to random QPNs (0x100000-0xEFFFFF, never the victim's)
//     wrong_source    a WRITE to the server's QP, right R_Key and VA
//     wrong_pkey      the same with P_Key 0x7FFF
//   from the server's peer's address (--spoof, another UDP source port: the
//   source port is entropy in RoCEv2 and not checked), each at a PSN far
//   ahead of the window (--psn + 0x600000) and far behind it (--psn - 0x200000):
//     guessed_rkey    a WRITE with a random R_Key
//     stale_rkey      a WRITE with the peer's own R_Key (--stale-rkey: valid
//                     elsewhere, never registered here)
//     wrap_2_64       a WRITE with the right R_Key at VA 2^64-16 (wraps)
//     beyond_mr       an RDMA READ with the right R_Key and VA, 2 GiB long
//
// The PSNs are chosen so that no spoofed packet can land inside the connected
// QP's stream while the transfer runs (the caller keeps the transfer under
// 6 million packets): an out-of-window request is refused before its R_Key is
// looked at, by rocelab as by a NIC. A spoofed packet at the expected PSN with
// a bad R_Key would (legitimately) NAK and break the connection; those are
// covered packet by packet in tests/emu/attacker_udp_test.cc.
//
// Prints one line per attack: "attack NAME packets N". Used by
// tests/attack/attacker.sh.
#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/attack/craft.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace asio = boost::asio;
using namespace rocelab;

namespace {

using attack::Rng;

struct Spec {
  bool read = false;  // RDMA READ request (else WRITE Only with 64 bytes)
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t pkey = wire::kDefaultPkey;
  uint32_t rkey = 0;
  uint64_t va = 0;
  uint32_t len = 64;
};

// The packet of SPEC from src:sport to dst, its ICRC computed (empty on error).
std::vector<std::byte> build(const Spec& s, const wire::IpAddr& src, uint16_t sport, const wire::IpAddr& dst) {
  wire::RoceHeaders h;
  h.bth.opcode = s.read ? wire::op::kRcReadRequest : wire::op::kRcWriteOnly;
  h.bth.dest_qpn = wire::Qpn(s.qpn);
  h.bth.psn = wire::Psn(s.psn & wire::kMask24);
  h.bth.pkey = s.pkey;
  h.bth.ack_req = true;
  h.reth.va = s.va;
  h.reth.rkey = s.rkey;
  h.reth.dma_len = s.len;
  std::vector<std::byte> payload(s.read ? 0 : s.len, std::byte{0xA7});
  return attack::udp_payload(src, sport, dst, h, payload);
}

struct Attack {
  std::string name;
  bool spoofed;  // from the peer's address (else the attacker's own)
  std::function<std::vector<std::byte>(Rng&, const wire::IpAddr& src, uint16_t sport)> make;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rocelab_attacker: send crafted RoCEv2 packets at a victim's connected QP"};
  std::string from, spoof, to;
  uint32_t qpn = 0, rkey = 0, stale_rkey = 0, psn = 0;
  uint64_t va = 0;
  unsigned rounds = 100;
  double gap_ms = 1.0;
  app.add_option("--from", from, "the attacker's own IPv4 address")->required();
  app.add_option("--spoof", spoof, "the victim's peer's IPv4 address (sent from with another UDP port)")->required();
  app.add_option("--to", to, "the victim's IPv4 address (UDP 4791)")->required();
  app.add_option("--qpn", qpn, "the victim's connected QPN")->required()->check(CLI::Range(1u, 0xFFFFFFu));
  app.add_option("--rkey", rkey, "the victim's R_Key")->required();
  app.add_option("--va", va, "the victim's MR address")->required();
  app.add_option("--psn", psn, "the victim's first expected PSN (its peer's initial PSN)")
      ->required()->check(CLI::Range(0u, 0xFFFFFFu));
  app.add_option("--stale-rkey", stale_rkey, "an R_Key not registered at the victim (default: --rkey + 0x100)");
  app.add_option("--rounds", rounds, "how many times each attack is sent")->check(CLI::Range(1u, 1000000u));
  app.add_option("--gap-ms", gap_ms, "pause between rounds (ms)")->check(CLI::Range(0.0, 1000.0));
  CLI11_PARSE(app, argc, argv);
  auto own = wire::IpAddr::parse(from), peer = wire::IpAddr::parse(spoof), dst = wire::IpAddr::parse(to);
  if (!own || !peer || !dst || own->v6 || peer->v6 || dst->v6) {
    std::fprintf(stderr, "rocelab_attacker: --from, --spoof and --to must be IPv4 addresses\n");
    return 2;
  }
  if (stale_rkey == 0) stale_rkey = rkey + 0x100;
  asio::io_context io;
  asio::ip::udp::socket own_sock(io), peer_sock(io);
  boost::system::error_code ec;
  const uint16_t own_port = 0xC002, peer_port = 0xC003;
  own_sock.open(asio::ip::udp::v4(), ec);
  if (!ec) own_sock.bind({asio::ip::make_address_v4(own->v4_u32()), own_port}, ec);
  if (!ec) peer_sock.open(asio::ip::udp::v4(), ec);
  if (!ec) peer_sock.bind({asio::ip::make_address_v4(peer->v4_u32()), peer_port}, ec);
  if (ec) {
    std::fprintf(stderr, "rocelab_attacker: cannot bind %s and %s: %s\n", from.c_str(), spoof.c_str(),
                 ec.message().c_str());
    return 1;
  }
  const uint32_t ahead = (psn + 0x600000) & wire::kMask24, behind = (psn - 0x200000) & wire::kMask24;
  const Spec valid{.qpn = qpn, .psn = ahead, .rkey = rkey, .va = va};
  std::vector<Attack> attacks;
  attacks.push_back({"bad_icrc", false, [&](Rng&, const wire::IpAddr& s, uint16_t p) {
                       auto b = build(valid, s, p, *dst);
                       if (!b.empty()) b.back() ^= std::byte{0x5A};
                       return b;
                     }});
  attacks.push_back({"truncated", false, [&](Rng&, const wire::IpAddr& s, uint16_t p) {
                       auto b = build(valid, s, p, *dst);
                       b.resize(20);
                       return b;
                     }});
  attacks.push_back({"random_qpn", false, [&](Rng& r, const wire::IpAddr& s, uint16_t p) {
                       Spec x = valid;
                       do x.qpn = static_cast<uint32_t>(0x100000 + r.next() % 0xE00000); while (x.qpn == qpn);
                       x.psn = static_cast<uint32_t>(r.next());
                       return build(x, s, p, *dst);
                     }});
  attacks.push_back({"wrong_source", false, [&](Rng&, const wire::IpAddr& s, uint16_t p) {
                       return build(valid, s, p, *dst);
                     }});
  attacks.push_back({"wrong_pkey", true, [&](Rng&, const wire::IpAddr& s, uint16_t p) {
                       Spec x = valid;
                       x.pkey = 0x7FFF;
                       return build(x, s, p, *dst);
                     }});
  for (uint32_t at : {ahead, behind}) {
    const std::string where = at == ahead ? "_ahead" : "_behind";
    attacks.push_back({"guessed_rkey" + where, true, [&, at](Rng& r, const wire::IpAddr& s, uint16_t p) {
                         Spec x = valid;
                         x.psn = at;
                         do x.rkey = static_cast<uint32_t>(r.next()); while (x.rkey == rkey);
                         return build(x, s, p, *dst);
                       }});
    attacks.push_back({"stale_rkey" + where, true, [&, at](Rng&, const wire::IpAddr& s, uint16_t p) {
                         Spec x = valid;
                         x.psn = at;
                         x.rkey = stale_rkey;
                         return build(x, s, p, *dst);
                       }});
    attacks.push_back({"wrap_2_64" + where, true, [&, at](Rng&, const wire::IpAddr& s, uint16_t p) {
                         Spec x = valid;
                         x.psn = at;
                         x.va = ~uint64_t{0} - 15;
                         return build(x, s, p, *dst);
                       }});
    attacks.push_back({"beyond_mr" + where, true, [&, at](Rng&, const wire::IpAddr& s, uint16_t p) {
                         Spec x = valid;
                         x.psn = at;
                         x.read = true;
                         x.len = 1u << 31;
                         return build(x, s, p, *dst);
                       }});
  }
  const asio::ip::udp::endpoint ep(asio::ip::make_address_v4(dst->v4_u32()), wire::kRoceV2Port);
  Rng rng{0xA77AC4};
  std::vector<uint64_t> sent(attacks.size(), 0);
  uint64_t failed = 0;
  for (unsigned round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < attacks.size(); ++i) {
      auto& a = attacks[i];
      auto& sock = a.spoofed ? peer_sock : own_sock;
      auto pkt = a.make(rng, a.spoofed ? *peer : *own, a.spoofed ? peer_port : own_port);
      if (pkt.empty()) {
        std::fprintf(stderr, "rocelab_attacker: cannot encode %s\n", a.name.c_str());
        return 1;
      }
      sock.send_to(asio::buffer(pkt.data(), pkt.size()), ep, 0, ec);
      if (ec) ++failed; else ++sent[i];
    }
    if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
  }
  for (size_t i = 0; i < attacks.size(); ++i)
    std::printf("attack %s packets %llu\n", attacks[i].name.c_str(), static_cast<unsigned long long>(sent[i]));
  std::printf("rocelab_attacker: %u rounds, psn ahead 0x%06x behind 0x%06x, %llu sends failed\n", rounds, ahead,
              behind, static_cast<unsigned long long>(failed));
  return failed == 0 ? 0 : 1;
}
