// rocelab_impersonator: the attacker of tests/attack/impersonate.sh as a
// process of its own. It sits at the address the victim's QPs are
// connected to (attack_victim, tests/attack/victim.c, under `rocelab run`), so
// its requests pass the source-address check and arrive at the PSN the
// responder expects: what stops them must be the responder's checks (R_Key,
// range, access rights, alignment), as on a NIC, not the PSN window. Every
// packet is built by src/wire's encoder with a correct ICRC, unless the attack
// is a malformed packet.
//
// One victim QP per case (an access fault moves the responder's QP to ERR,
// IBTA 9.9.2 / rxe's do_class_ac_error), each request at PSN 0:
//   write_ok, read_ok, atomic_ok   the controls: ACK, the region's bytes, the original value
//   guessed_rkey, stale_rkey       WRITE with a random / a deregistered R_Key: NAK remote access (0x62)
//   wrap_2_64                      WRITE at VA 2^64-16 with the right R_Key: 0x62
//   write_beyond_mr                WRITE whose last 32 bytes lie past the MR: 0x62
//   write_to_ro, write_to_local    WRITE to an MR without remote write: 0x62
//   read_from_wo, read_beyond_mr   READ without remote read / past the MR's end: 0x62
//   read_too_long                  READ of 2 GiB, beyond the port's max_msg_sz: NAK
//                                  invalid request (0x61; rxe: a length error)
//   atomic_misaligned              CMP_SWAP at VA+4: NAK invalid request (0x61)
//   atomic_out_of_range            FETCH_ADD at the byte after the MR: 0x62
//   atomic_no_access               FETCH_ADD on an MR without remote atomic: 0x62
//   psn_far_outside                WRITEs at PSN 0x400000 (at most a PSN-sequence NAK
//                                  naming PSN 0) and 0xC00000 (a duplicate: at most an ACK
//                                  of PSN 0xFFFFFF), then the real WRITE at PSN 0: ACK
//   wrong_pkey                     the real WRITE with P_Key 0x7FFF: no answer; then with
//                                  the right P_Key: ACK
//   wrong_source                   the real WRITE from another address (--intruder): no
//                                  answer to anyone; then from here: ACK
// A UD QP (Q_Key 0x11111111): SENDs with Q_Keys 0x22222222, 0x91111111 and 0
// are dropped, then one with the right Q_Key is received (the victim checks it).
// Malformed packets: every file of each --malformed DIR (a fuzz corpus entry of
// tests/fuzz/fuzz_wire_decode: one selector byte, then the bytes) is sent as
// the UDP payload as it is; then, when it is at least a BTH and an ICRC long,
// aimed: its BTH names one of the victim's "bag" QPs (in a PD without remote
// access), its ICRC made right for this path, so that it reaches the engine's
// parsers and state machines, and once more cut in the middle (ICRC right).
// Then the liveness WRITE on another QP must still be ACKed.
//
// The WRITEs the victim allows are idempotent (the same bytes each time):
// rw[0,64) = 0xA7, rw[64,72) += 1 once, rw[128,192) = 0x5A; the victim checks
// that nothing else of its memory changed. Prints "case NAME: ok|FAIL ...";
// exits 0 when every case went as the IBTA prescribes.
#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <poll.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/attack/craft.h"
#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace asio = boost::asio;
using namespace rocelab;
namespace op = wire::op;

namespace {

constexpr uint8_t kNakSeq = 0x60, kNakInvalid = 0x61, kNakAccess = 0x62;
constexpr uint32_t kRegion = 4096;
constexpr uint16_t kIntruderPort = 0xC0DE;  // the ICRC covers the UDP ports

class Impersonator {
 public:
  Impersonator(wire::IpAddr me, wire::IpAddr intruder, wire::IpAddr victim)
      : me_(me), intruder_(intruder), victim_(victim) {}

  bool open() {
    boost::system::error_code ec;
    sock_.open(asio::ip::udp::v4(), ec);
    if (!ec) sock_.bind({asio::ip::make_address_v4(me_.v4_u32()), wire::kRoceV2Port}, ec);
    if (!ec) intruder_sock_.open(asio::ip::udp::v4(), ec);
    if (!ec) intruder_sock_.bind({asio::ip::make_address_v4(intruder_.v4_u32()), kIntruderPort}, ec);
    if (ec) std::fprintf(stderr, "rocelab_impersonator: cannot bind: %s\n", ec.message().c_str());
    return !ec;
  }

  // Sends a UDP payload from here (or from the intruder's address).
  void send(const std::vector<std::byte>& pkt, bool from_intruder = false) {
    const asio::ip::udp::endpoint to(asio::ip::make_address_v4(victim_.v4_u32()), wire::kRoceV2Port);
    boost::system::error_code ec;
    (from_intruder ? intruder_sock_ : sock_).send_to(asio::buffer(pkt.data(), pkt.size()), to, 0, ec);
    if (ec) std::fprintf(stderr, "rocelab_impersonator: send: %s\n", ec.message().c_str());
  }

  std::vector<std::byte> build(const wire::RoceHeaders& h, std::span<const std::byte> payload,
                               bool from_intruder = false) const {
    return attack::udp_payload(from_intruder ? intruder_ : me_, from_intruder ? kIntruderPort : wire::kRoceV2Port,
                               victim_, h, payload);
  }

  // The next packet for our QPN `qpn` within ms (others are skipped), parsed;
  // its payload is copied into `payload`.
  std::optional<wire::RoceHeaders> reply(uint32_t qpn, int ms, std::vector<std::byte>* payload = nullptr) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{sock_.native_handle(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) != 1) return std::nullopt;
      asio::ip::udp::endpoint from;
      boost::system::error_code ec;
      const size_t n = sock_.receive_from(asio::buffer(in_.data(), in_.size()), from, 0, ec);
      if (ec) continue;
      auto pkt = wire::parse_roce(std::span<const std::byte>(in_.data(), n));
      if (!pkt || pkt->hdr.bth.dest_qpn.value() != qpn) continue;
      if (payload) payload->assign(pkt->payload.begin(), pkt->payload.end());
      return pkt->hdr;
    }
  }

  // Whether anything at all arrives here for `qpn` within ms; and the
  // intruder's socket must stay silent.
  bool silent(uint32_t qpn, int ms) {
    if (reply(qpn, ms)) return false;
    pollfd p{intruder_sock_.native_handle(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  // The UDP payload `pkt` with the BTH's QPN replaced and the ICRC made right
  // for this path (from here to the victim). pkt must hold a BTH and an ICRC.
  std::vector<std::byte> aim(std::vector<std::byte> pkt, uint32_t qpn) const {
    pkt[5] = std::byte(static_cast<uint8_t>(qpn >> 16));
    pkt[6] = std::byte(static_cast<uint8_t>(qpn >> 8));
    pkt[7] = std::byte(static_cast<uint8_t>(qpn));
    wire::IpUdpInfo ip;
    ip.src = me_;
    ip.dst = victim_;
    ip.sport = wire::kRoceV2Port;
    std::array<std::byte, wire::kIpv4HeaderLen + wire::kUdpHeaderLen> hdr{};
    wire::write_ip_udp(hdr.data(), ip, pkt.size());
    wire::IcrcAccumulator acc(hdr.data(), wire::kIpv4HeaderLen, pkt.data());
    acc.add(std::span<const std::byte>(pkt).subspan(wire::kBthLen, pkt.size() - wire::kBthLen - wire::kIcrcLen));
    for (size_t i = 0; i < 4; ++i)
      pkt[pkt.size() - 4 + i] = std::byte(static_cast<uint8_t>(acc.value() >> (8 * i)));
    return pkt;
  }

 private:
  wire::IpAddr me_, intruder_, victim_;
  asio::io_context io_;
  asio::ip::udp::socket sock_{io_}, intruder_sock_{io_};
  std::array<std::byte, 65536> in_{};
};

// The victim's "info NAME VALUE" lines (VALUE a number, 0x... allowed);
// nothing when the file cannot be read or a value is not a number.
std::optional<std::map<std::string, uint64_t>> read_info(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::map<std::string, uint64_t> m;
  std::string word, name, value;
  while (in >> word) {
    if (word != "info") continue;
    if (!(in >> name >> value)) break;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 0);
    if (errno != 0 || end == value.c_str() || *end != '\0') return std::nullopt;
    m[name] = v;
  }
  return m;
}

wire::RoceHeaders request(uint8_t opcode, uint32_t qpn, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len) {
  wire::RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qpn = wire::Qpn(qpn);
  h.bth.psn = wire::Psn(psn & wire::kMask24);
  h.bth.ack_req = true;
  h.reth = {va, rkey, len};
  h.atomic_eth = {va, rkey, 1, 0};
  return h;
}

// Byte j of victim region r (attack_victim's pattern).
uint8_t pattern(int r, uint32_t j) { return static_cast<uint8_t>(j * 37 + static_cast<uint32_t>(r) * 11 + 1); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rocelab_impersonator: attack a victim's QPs as their connected peer"};
  std::string me_s, intruder_s, victim_s, info_path;
  std::vector<std::string> malformed_dirs;
  app.add_option("--me", me_s, "this peer's IPv4 address (the victim's QPs are connected to it)")->required();
  app.add_option("--intruder", intruder_s, "a third IPv4 address, for the wrong-source case")->required();
  app.add_option("--to", victim_s, "the victim's IPv4 address")->required();
  app.add_option("--info", info_path, "the victim's output (its \"info NAME VALUE\" lines)")->required()
      ->check(CLI::ExistingFile);
  app.add_option("--malformed", malformed_dirs, "a directory of fuzz corpus entries to send")
      ->check(CLI::ExistingDirectory);
  CLI11_PARSE(app, argc, argv);
  auto me = wire::IpAddr::parse(me_s), intruder = wire::IpAddr::parse(intruder_s),
       victim = wire::IpAddr::parse(victim_s);
  if (!me || !intruder || !victim || me->v6 || intruder->v6 || victim->v6) {
    std::fprintf(stderr, "rocelab_impersonator: --me, --intruder and --to must be IPv4 addresses\n");
    return 2;
  }
  auto info = read_info(info_path);
  const char* keys[] = {"case17", "live", "bag3", "ud", "bag_ud", "qkey", "rkey_rw", "va_rw", "rkey_ro", "va_ro",
                        "rkey_wo", "va_wo", "rkey_none", "va_none", "rkey_stale", "va_stale"};
  if (!info) {
    std::fprintf(stderr, "rocelab_impersonator: %s: an \"info NAME VALUE\" line without a number\n",
                 info_path.c_str());
    return 2;
  }
  for (const char* k : keys) {
    if (!info->count(k)) {
      std::fprintf(stderr, "rocelab_impersonator: %s lacks \"info %s\"\n", info_path.c_str(), k);
      return 2;
    }
  }
  auto& I = *info;
  Impersonator imp(*me, *intruder, *victim);
  if (!imp.open()) return 1;

  int failed = 0;
  auto verdict = [&](const std::string& name, bool ok, const std::string& detail) {
    std::printf("case %s: %s%s%s\n", name.c_str(), ok ? "ok" : "FAIL", detail.empty() ? "" : " - ",
                detail.c_str());
    if (!ok) ++failed;
  };
  auto describe = [](const std::optional<wire::RoceHeaders>& r) -> std::string {
    if (!r) return "no answer";
    char b[96];
    std::snprintf(b, sizeof b, "opcode 0x%02x PSN 0x%06x syndrome 0x%02x", r->bth.opcode, r->bth.psn.value(),
                  r->aeth.syndrome);
    return b;
  };
  constexpr int kWait = 3000;
  const std::vector<std::byte> a7(64, std::byte{0xA7});
  const std::vector<std::byte> none;
  int next_case = 0;

  // The controls and the refusals, each on a QP of its own at PSN 0.
  struct Refusal {
    const char* name;
    wire::RoceHeaders h;
    size_t payload;
    uint8_t syndrome;
  };
  const uint64_t rw = I["va_rw"], ro = I["va_ro"], wo = I["va_wo"];
  const uint32_t rkey_rw = static_cast<uint32_t>(I["rkey_rw"]), rkey_ro = static_cast<uint32_t>(I["rkey_ro"]),
                 rkey_wo = static_cast<uint32_t>(I["rkey_wo"]), rkey_none = static_cast<uint32_t>(I["rkey_none"]),
                 rkey_stale = static_cast<uint32_t>(I["rkey_stale"]);
  auto qp = [&](int i) { return static_cast<uint32_t>(I["case" + std::to_string(i)]); };
  {  // write_ok
    const int i = next_case++;
    imp.send(imp.build(request(op::kRcWriteOnly, qp(i), 0, rw, rkey_rw, 64), a7));
    auto r = imp.reply(0x100 + i, kWait);
    verdict("write_ok", r && r->bth.opcode == op::kRcAck && (r->aeth.syndrome & 0x60) == 0 && r->bth.psn.value() == 0,
            describe(r));
  }
  {  // read_ok: the region's own bytes come back
    const int i = next_case++;
    imp.send(imp.build(request(op::kRcReadRequest, qp(i), 0, ro + 100, rkey_ro, 64), none));
    std::vector<std::byte> data;
    auto r = imp.reply(0x100 + i, kWait, &data);
    bool same = data.size() == 64;
    for (uint32_t j = 0; same && j < 64; ++j) same = data[j] == std::byte{pattern(1, 100 + j)};
    verdict("read_ok", r && r->bth.opcode == op::kRcReadRespOnly && same,
            describe(r) + (same ? ", the region's 64 bytes" : ", wrong bytes"));
  }
  {  // atomic_ok: FETCH_ADD 1 at rw+64 returns the pattern's u64 (little-endian memory)
    const int i = next_case++;
    imp.send(imp.build(request(op::kRcFetchAdd, qp(i), 0, rw + 64, rkey_rw, 8), none));
    auto r = imp.reply(0x100 + i, kWait);
    uint64_t want = 0;
    for (uint32_t j = 0; j < 8; ++j) want |= uint64_t{pattern(0, 64 + j)} << (8 * j);
    verdict("atomic_ok", r && r->bth.opcode == op::kRcAtomicAck && r->atomic_ack_eth.orig == want,
            describe(r) + (r && r->atomic_ack_eth.orig == want ? ", the original value" : ", wrong original value"));
  }
  uint32_t guessed = 0x5EC2E7;
  while (guessed == rkey_rw || guessed == rkey_ro || guessed == rkey_wo || guessed == rkey_none) ++guessed;
  const Refusal refusals[] = {
      {"guessed_rkey", request(op::kRcWriteOnly, 0, 0, rw, guessed, 64), 64, kNakAccess},
      {"stale_rkey", request(op::kRcWriteOnly, 0, 0, I["va_stale"], rkey_stale, 64), 64, kNakAccess},
      {"wrap_2_64", request(op::kRcWriteOnly, 0, 0, ~uint64_t{0} - 15, rkey_rw, 64), 64, kNakAccess},
      {"write_beyond_mr", request(op::kRcWriteOnly, 0, 0, rw + kRegion - 32, rkey_rw, 64), 64, kNakAccess},
      {"write_to_ro", request(op::kRcWriteOnly, 0, 0, ro, rkey_ro, 64), 64, kNakAccess},
      {"write_to_local", request(op::kRcWriteOnly, 0, 0, I["va_none"], rkey_none, 64), 64, kNakAccess},
      {"read_from_wo", request(op::kRcReadRequest, 0, 0, wo, rkey_wo, 64), 0, kNakAccess},
      {"read_beyond_mr", request(op::kRcReadRequest, 0, 0, rw + kRegion - 32, rkey_rw, 64), 0, kNakAccess},
      {"read_too_long", request(op::kRcReadRequest, 0, 0, rw, rkey_rw, 1u << 31), 0, kNakInvalid},
      {"atomic_misaligned", request(op::kRcCmpSwap, 0, 0, rw + 4, rkey_rw, 8), 0, kNakInvalid},
      {"atomic_out_of_range", request(op::kRcFetchAdd, 0, 0, rw + kRegion, rkey_rw, 8), 0, kNakAccess},
      {"atomic_no_access", request(op::kRcFetchAdd, 0, 0, wo, rkey_wo, 8), 0, kNakAccess},
  };
  for (const Refusal& x : refusals) {
    const int i = next_case++;
    wire::RoceHeaders h = x.h;
    h.bth.dest_qpn = wire::Qpn(qp(i));
    imp.send(imp.build(h, std::vector<std::byte>(x.payload, std::byte{0x66})));
    auto r = imp.reply(0x100 + i, kWait);
    verdict(x.name, r && r->bth.opcode == op::kRcAck && r->aeth.syndrome == x.syndrome && r->bth.psn.value() == 0,
            describe(r));
  }
  // After each of the last three, the real WRITE at PSN 0 must still be ACKed.
  auto still_acked = [&](int i) {
    imp.send(imp.build(request(op::kRcWriteOnly, qp(i), 0, rw, rkey_rw, 64), a7));
    auto r = imp.reply(0x100 + i, kWait);
    return r && r->bth.opcode == op::kRcAck && (r->aeth.syndrome & 0x60) == 0 && r->bth.psn.value() == 0;
  };
  {  // psn_far_outside
    const int i = next_case++;
    bool ok = true;
    std::string detail;
    for (uint32_t psn : {0x400000u, 0xC00000u}) {
      imp.send(imp.build(request(op::kRcWriteOnly, qp(i), psn, rw + 256, rkey_rw, 64), a7));
      auto r = imp.reply(0x100 + i, 300);
      if (!r) continue;
      const bool ahead = psn == 0x400000u;
      const bool fine = ahead ? r->aeth.syndrome == kNakSeq && r->bth.psn.value() == 0
                              : (r->aeth.syndrome & 0x60) == 0 && r->bth.psn.value() == 0xFFFFFF;
      if (!fine) ok = false;
      detail += (ahead ? "ahead: " : "behind: ") + describe(r) + "; ";
    }
    const bool acked = still_acked(i);
    verdict("psn_far_outside", ok && acked, detail + (acked ? "then PSN 0 ACKed" : "then PSN 0 not ACKed"));
  }
  {  // wrong_pkey
    const int i = next_case++;
    wire::RoceHeaders h = request(op::kRcWriteOnly, qp(i), 0, rw + 256, rkey_rw, 64);
    h.bth.pkey = 0x7FFF;
    imp.send(imp.build(h, a7));
    const bool quiet = imp.silent(0x100 + i, 300);
    const bool acked = still_acked(i);
    verdict("wrong_pkey", quiet && acked,
            std::string(quiet ? "no answer" : "answered") + (acked ? ", then PSN 0 ACKed" : ", then not ACKed"));
  }
  {  // wrong_source
    const int i = next_case++;
    imp.send(imp.build(request(op::kRcWriteOnly, qp(i), 0, rw + 256, rkey_rw, 64), a7, /*from_intruder=*/true),
             /*from_intruder=*/true);
    const bool quiet = imp.silent(0x100 + i, 300);
    const bool acked = still_acked(i);
    verdict("wrong_source", quiet && acked,
            std::string(quiet ? "no answer" : "answered") + (acked ? ", then PSN 0 ACKed" : ", then not ACKed"));
  }

  // UD: three wrong Q_Keys, then the right one (the victim checks its receive).
  {
    const uint32_t ud = static_cast<uint32_t>(I["ud"]), qkey = static_cast<uint32_t>(I["qkey"]);
    const std::vector<std::byte> c3(32, std::byte{0xC3});
    for (uint32_t k : {0x22222222u, qkey | 0x80000000u, 0u, qkey}) {
      wire::RoceHeaders h;
      h.bth.opcode = op::kUdSendOnly;
      h.bth.dest_qpn = wire::Qpn(ud);
      h.deth = {k, wire::Qpn(0x300)};
      imp.send(imp.build(h, c3));
    }
    std::printf("case ud_qkey: sent (Q_Keys 0x22222222, 0x%08x, 0 and the right one; the victim judges)\n",
                qkey | 0x80000000u);
  }

  // Malformed packets, as they are and aimed at the bag QPs.
  {
    const uint32_t bags[] = {static_cast<uint32_t>(I["bag0"]), static_cast<uint32_t>(I["bag1"]),
                             static_cast<uint32_t>(I["bag2"]), static_cast<uint32_t>(I["bag3"]),
                             static_cast<uint32_t>(I["bag_ud"])};
    uint64_t files = 0, as_is = 0, aimed = 0;
    std::vector<std::filesystem::path> paths;
    for (const auto& d : malformed_dirs)
      for (const auto& e : std::filesystem::directory_iterator(d))
        if (e.is_regular_file()) paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    auto pace = [&](uint64_t n) {
      if (n % 16 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    for (const auto& p : paths) {
      std::ifstream in(p, std::ios::binary);
      std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (raw.size() < 2 || raw.size() > 9000) continue;
      ++files;
      std::vector<std::byte> pkt(raw.size() - 1);
      std::memcpy(pkt.data(), raw.data() + 1, pkt.size());
      imp.send(pkt);
      pace(++as_is);
      if (pkt.size() < wire::kBthLen + wire::kIcrcLen) continue;
      imp.send(imp.aim(pkt, bags[aimed % std::size(bags)]));
      pace(++aimed);
      const size_t body = pkt.size() - wire::kBthLen - wire::kIcrcLen;
      if (body >= 2) {
        std::vector<std::byte> cut(pkt.begin(), pkt.begin() + static_cast<std::ptrdiff_t>(wire::kBthLen + body / 2));
        cut.resize(cut.size() + wire::kIcrcLen);
        imp.send(imp.aim(cut, bags[aimed % std::size(bags)]));
        pace(++aimed);
      }
    }
    std::printf("case malformed: sent %llu corpus entries: %llu as they are, %llu aimed at the bag QPs\n",
                static_cast<unsigned long long>(files), static_cast<unsigned long long>(as_is),
                static_cast<unsigned long long>(aimed));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  {  // The victim still answers: the liveness WRITE on a QP nothing touched.
    const uint32_t live = static_cast<uint32_t>(I["live"]);
    imp.send(imp.build(request(op::kRcWriteOnly, live, 0, rw + 128, rkey_rw, 64),
                       std::vector<std::byte>(64, std::byte{0x5A})));
    auto r = imp.reply(0x1FF, kWait);
    verdict("alive_after_malformed",
            r && r->bth.opcode == op::kRcAck && (r->aeth.syndrome & 0x60) == 0 && r->bth.psn.value() == 0,
            describe(r));
  }
  std::printf("rocelab_impersonator: %d of %d cases failed\n", failed, next_case + 1);
  return failed == 0 ? 0 : 1;
}
