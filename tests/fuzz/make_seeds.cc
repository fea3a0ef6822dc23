// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/),
// every packet made by rocelab's own encoder (src/wire). Deterministic: ctest
// fuzz.seeds_current regenerates them into a temporary directory and checks
// that the checked-in corpus is what this program writes.
//   make_seeds OUT_DIR
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "capture/pcap_writer.h"
#include "tests/fuzz/victim.h"
#include "wire/frame.h"
#include "wire/packet.h"

namespace {

using namespace rocelab;
namespace fs = std::filesystem;

fs::path g_out;

void put(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(g_out / target);
  std::ofstream f(g_out / target / name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
void put_text(const std::string& target, const std::string& name, const std::string& text) {
  put(target, name, std::vector<uint8_t>(text.begin(), text.end()));
}

// Headers with every field set to something a real packet would carry.
wire::RoceHeaders headers_for(uint8_t opcode, uint32_t qpn, uint32_t psn, uint32_t rkey, uint64_t va) {
  wire::RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qpn = wire::Qpn(qpn);
  h.bth.psn = wire::Psn(psn);
  h.bth.ack_req = true;
  h.reth = {va, rkey, 16};
  h.atomic_eth = {va, rkey, 1, 0};
  h.aeth.syndrome = 0x1F;
  h.aeth.msn = 1;
  h.deth = {fuzz::kQkey, wire::Qpn(fuzz::kPeerQpn)};
  h.immdt.imm = 0x01020304;
  h.ieth.rkey = rkey;
  return h;
}

bool carries_payload(uint8_t opcode) {
  std::array<std::byte, wire::kMaxRoceLen> buf{};
  std::array<std::byte, 1> one{};
  return wire::encode_roce(buf, headers_for(opcode, 1, 0, 0, 0), one).ok();
}

std::vector<uint8_t> roce_bytes(const wire::RoceHeaders& h, size_t payload_len) {
  std::vector<std::byte> payload(payload_len);
  for (size_t i = 0; i < payload_len; ++i) payload[i] = std::byte(static_cast<uint8_t>(i));
  std::vector<uint8_t> out(wire::kMaxRoceLen);
  auto n = wire::encode_roce(std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size()),
                             h, payload);
  out.resize(n ? *n : 0);
  return out;
}

wire::IpUdpInfo ip_info(bool v6) {
  wire::IpUdpInfo ip;
  if (v6) {
    ip.src = *wire::IpAddr::parse("fd00::2");
    ip.dst = *wire::IpAddr::parse("fd00::1");
    ip.ip_header_len = wire::kIpv6HeaderLen;
  } else {
    ip.src = wire::IpAddr::v4(192, 0, 2, 2);
    ip.dst = wire::IpAddr::v4(192, 0, 2, 1);
  }
  return ip;
}

std::vector<uint8_t> frame_bytes(bool v6, const wire::RoceHeaders& h, size_t payload_len, bool eth) {
  std::vector<std::byte> payload(payload_len, std::byte{0x5A});
  std::vector<uint8_t> out(wire::kMaxFrameLen);
  auto n = wire::build_frame(std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size()),
                             ip_info(v6), h, payload, eth);
  out.resize(n ? *n : 0);
  return out;
}

char hex2(unsigned v) { return "0123456789abcdef"[v & 15]; }
std::string op_name(uint8_t op) { return std::string("op") + hex2(op >> 4) + hex2(op); }

void wire_decode() {
  for (int op = 0; op < 256; ++op) {
    const uint8_t o = static_cast<uint8_t>(op);
    if (!wire::op_info(o).valid) continue;
    const size_t plen = carries_payload(o) ? 13 : 0;
    const wire::RoceHeaders h = headers_for(o, 0x12, 7, 0x104, 0x10000);
    for (const bool v6 : {false, true}) {
      std::vector<uint8_t> in{1};  // Ethernet
      const std::vector<uint8_t> f = frame_bytes(v6, h, plen, true);
      in.insert(in.end(), f.begin(), f.end());
      put("wire_decode", op_name(o) + (v6 ? "-eth-ipv6" : "-eth-ipv4"), in);
    }
    std::vector<uint8_t> in{0};  // the transport packet alone
    const std::vector<uint8_t> t = roce_bytes(h, plen);
    in.insert(in.end(), t.begin(), t.end());
    put("wire_decode", op_name(o) + "-bth", in);
  }
  // Raw IP (link type 2 of the target), both IP versions.
  const wire::RoceHeaders h = headers_for(0x0A, 0x12, 7, 0x104, 0x10000);
  for (const bool v6 : {false, true}) {
    std::vector<uint8_t> in{2};
    const std::vector<uint8_t> f = frame_bytes(v6, h, 100, false);
    in.insert(in.end(), f.begin(), f.end());
    put("wire_decode", std::string("write-only-raw-") + (v6 ? "ipv6" : "ipv4"), in);
  }
}

void capture_decode(const fs::path& tmp) {
  fs::create_directories(g_out / "capture_decode");
  struct Cap {
    const char* name;
    bool v6, nanosecond;
    int link;
  };
  for (const Cap c : {Cap{"rc-ipv4.pcap", false, false, 1}, Cap{"rc-ipv6.pcap", true, false, 1},
                      Cap{"raw-ipv4-ns.pcap", false, true, 12}}) {
    const fs::path path = g_out / "capture_decode" / c.name;
    auto w = capture::PcapWriter::open(path.string(), {c.link, 65535, c.nanosecond});
    if (!w) continue;
    // A short RC conversation: SEND, WRITE, READ request and response, an
    // atomic and its ACK, an ACK, a NAK; one packet with a bad ICRC.
    const uint8_t ops[] = {0x04, 0x0A, 0x0C, 0x10, 0x14, 0x12, 0x11, 0x11, 0x64};
    uint64_t t = 1'700'000'000'000'000'000ull;
    for (size_t i = 0; i < std::size(ops); ++i) {
      wire::RoceHeaders h = headers_for(ops[i], 0x11 + (i % 2), static_cast<uint32_t>(i), 0x104, 0x1000);
      if (i == 7) h.aeth.syndrome = 0x61;  // NAK: invalid request
      std::vector<uint8_t> b = roce_bytes(h, carries_payload(ops[i]) ? 40 : 0);
      if (i == 8) b.back() ^= 0xFF;        // damaged ICRC
      wire::IpUdpInfo ip = ip_info(c.v6);
      if (i % 2) std::swap(ip.src, ip.dst);
      (void)w->write_roce(std::chrono::nanoseconds(t + i * 1500),
                          ip, std::span<const std::byte>(reinterpret_cast<const std::byte*>(b.data()), b.size()));
    }
    (void)w->close();
    // The same captures feed `rocelab check`'s analysis and the ladder, and `rocelab replay`.
    fs::create_directories(g_out / "trace_capture");
    fs::copy_file(path, g_out / "trace_capture" / c.name, fs::copy_options::overwrite_existing);
    fs::create_directories(g_out / "replay_capture");
    fs::copy_file(path, g_out / "replay_capture" / c.name, fs::copy_options::overwrite_existing);
  }
  (void)tmp;
}

// fuzz_check_sequence: 8 bytes a packet (see there); a fixed generator.
void check_sequence() {
  std::mt19937 rng(12);
  for (int k = 0; k < 6; ++k) {
    std::vector<uint8_t> b(8 * (16 + 16 * k));
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    // Mostly small PSN steps and the sender alternating, as a conversation goes.
    for (size_t i = 0; i < b.size(); i += 8) {
      b[i] = static_cast<uint8_t>((b[i] & 0xF4) | ((i / 8) & 1) | (((i / 8) & 1) << 1));
      b[i + 2] = static_cast<uint8_t>(rng() % 3);
    }
    put("check_sequence", "seq-" + std::to_string(k), b);
  }
}

void engine_recv() {
  fuzz::Victim v;
  const auto& mrs = v.mrs();
  const uint32_t rw = mrs[0].rkey;
  const uint64_t rw_va = mrs[0].iova;
  auto rec = [](uint8_t qp, const std::vector<uint8_t>& bytes) {
    std::vector<uint8_t> r{fuzz::kRecPacket, qp, static_cast<uint8_t>(bytes.size() >> 8),
                           static_cast<uint8_t>(bytes.size())};
    r.insert(r.end(), bytes.begin(), bytes.end());
    return r;
  };
  auto time = [](uint8_t exp) { return std::vector<uint8_t>{fuzz::kRecTime, exp, 0, 0}; };
  auto cat = [](std::initializer_list<std::vector<uint8_t>> parts) {
    std::vector<uint8_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  // Requests to every QP (index i): SEND only, WRITE only with a valid R_Key, READ, atomic.
  for (uint8_t i = 0; i < v.qps().size(); ++i) {
    const fuzz::QpInfo& q = v.qps()[i];
    const uint8_t base = q.type == emu::QpType::kRC ? 0x00 : q.type == emu::QpType::kUC ? 0x20 : 0x60;
    if (q.type == emu::QpType::kUD) {
      put("engine_recv", "qp" + std::to_string(i) + "-ud-send",
          rec(i, roce_bytes(headers_for(0x64, q.qpn, 0, rw, rw_va), 32)));
      continue;
    }
    put("engine_recv", "qp" + std::to_string(i) + "-send",
        rec(i, roce_bytes(headers_for(base | 0x04, q.qpn, 0, rw, rw_va), 64)));
    put("engine_recv", "qp" + std::to_string(i) + "-write",
        rec(i, roce_bytes(headers_for(base | 0x0A, q.qpn, 0, rw, rw_va + 8), 16)));
    put("engine_recv", "qp" + std::to_string(i) + "-send-first-last",
        cat({rec(i, roce_bytes(headers_for(base | 0x00, q.qpn, 0, rw, rw_va), 1024)),
             rec(i, roce_bytes(headers_for(base | 0x02, q.qpn, 1, rw, rw_va), 100))}));
    if (q.type == emu::QpType::kRC) {
      put("engine_recv", "qp" + std::to_string(i) + "-read",
          rec(i, roce_bytes(headers_for(0x0C, q.qpn, 0, rw, rw_va), 0)));
      put("engine_recv", "qp" + std::to_string(i) + "-fetch-add",
          rec(i, roce_bytes(headers_for(0x14, q.qpn, 0, rw, rw_va + 16), 0)));
    }
  }
  // A WRITE whose MR the victim deregisters between FIRST and LAST (QP 1).
  {
    const fuzz::QpInfo& q = v.qps()[1];
    wire::RoceHeaders first = headers_for(0x06, q.qpn, 0, rw, rw_va);
    first.reth.dma_len = 2048;
    put("engine_recv", "qp1-write-dereg-mid-message",
        cat({rec(1, roce_bytes(first, 1024)), std::vector<uint8_t>{fuzz::kRecLocal, 0, 0, 0},
             rec(1, roce_bytes(headers_for(0x08, q.qpn, 1, rw, rw_va), 1024))}));
  }
  // Responses to QP 0's outstanding SEND (PSN 0), WRITE (1), READ (2, two
  // packets of 1024 and 976 bytes), FETCH_ADD (4), CMP_SWP (5).
  const uint32_t q0 = v.qps()[0].qpn;
  wire::RoceHeaders ack = headers_for(0x11, q0, 1, 0, 0);
  wire::RoceHeaders rd_first = headers_for(0x0D, q0, 2, 0, 0);
  wire::RoceHeaders rd_last = headers_for(0x0F, q0, 3, 0, 0);
  rd_last.aeth.msn = 3;
  wire::RoceHeaders at1 = headers_for(0x12, q0, 4, 0, 0);
  at1.aeth.msn = 4;
  wire::RoceHeaders at2 = headers_for(0x12, q0, 5, 0, 0);
  at2.aeth.msn = 5;
  put("engine_recv", "qp0-responses",
      cat({rec(0, roce_bytes(ack, 0)), rec(0, roce_bytes(rd_first, 1024)), rec(0, roce_bytes(rd_last, 976)),
           rec(0, roce_bytes(at1, 0)), rec(0, roce_bytes(at2, 0))}));
  wire::RoceHeaders nak = headers_for(0x11, q0, 0, 0, 0);
  nak.aeth.syndrome = 0x60;  // PSN sequence error: go back
  wire::RoceHeaders rnr = headers_for(0x11, q0, 0, 0, 0);
  rnr.aeth.syndrome = 0x2E;
  put("engine_recv", "qp0-nak-rnr-timeouts",
      cat({rec(0, roce_bytes(nak, 0)), time(20), rec(0, roce_bytes(rnr, 0)), time(23), time(25), time(30)}));
}

void fault_schedule() {
  const char* specs[] = {"drop:psn=17:nth=2", "drop:class=ack:from=0ms:for=5ms",
                         "dup:class=read:dir=rx:p=0.5", "delay:delay=200us:jitter=50us;corrupt:opcode=0x04:count=1",
                         "reorder:by=3:max=2ms:every=4,drop:qpn=0x11:dir=both"};
  int i = 0;
  for (const char* s : specs) put_text("fault_schedule", "schedule" + std::to_string(i++), std::string(1, '\0') + s);
  put_text("fault_schedule", "env0", std::string(1, '\1') + "0.01\n0\n0.5\n!\n100\n20\n7\ndrop:psn=3");
  put_text("fault_schedule", "env1", std::string(1, '\1') + "1\n!\n!\n0.25\n0\n0\n18446744073709551615\n");
}

void shim_config() {
  put_text("shim_config", "default", "!\n!\n!\n!\n!\n!\n!\n!\n!");
  put_text("shim_config", "two-devices", "mlx0,mlx1\n10.0.0.1,fd00::1\n4096\n/tmp/x.pcap\n!\n1\n1\n0\n1");
  put_text("shim_config", "one-device", "rocelab0\n127.0.0.5\n1024");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  g_out = argv[1];
  wire_decode();
  capture_decode(g_out);
  engine_recv();
  fault_schedule();
  shim_config();
  check_sequence();
  return 0;
}
