// `rocelab opcodes [--pcap FILE]`: the BTH opcode table, and a capture with one
// packet of every RC, UC and UD opcode made by our encoder (traces/opcodes.pcap).
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "capture/pcap_writer.h"
#include "tools/commands.h"
#include "wire/frame.h"

namespace rocelab::tools {
namespace {

using namespace wire;
using namespace capture;

std::string header_list(const OpInfo& info) {
  static constexpr std::pair<Hdr, const char*> kNames[] = {
      {Hdr::kDeth, "DETH"},     {Hdr::kXrcEth, "XRCETH"},    {Hdr::kReth, "RETH"},
      {Hdr::kAtomicEth, "AtomicETH"}, {Hdr::kAeth, "AETH"}, {Hdr::kAtomicAckEth, "AtomicAckETH"},
      {Hdr::kImmDt, "ImmDt"},   {Hdr::kIeth, "IETH"},        {Hdr::kCnpPad, "reserved(16)"}};
  std::string s = "BTH";
  for (const auto& [h, name] : kNames)
    if (info.carries(h)) s += std::string("+") + name;
  if (info.is(OpClass::kPayload)) s += "+payload";
  return s;
}

void print_table() {
  std::printf("%-6s %-9s %-44s %s\n", "code", "transport", "name", "headers (bytes before payload)");
  for (const OpInfo& info : opcode_table()) {
    if (!info.valid) continue;
    std::printf("0x%02x   %-9s %-44s %s (%zu)\n", info.code,
                std::string(to_string(info.transport)).c_str(), std::string(info.name).c_str(),
                header_list(info).c_str(), info.header_bytes());
  }
}

// Documentation addresses (RFC 5737 TEST-NET-1): they only ever appear in a file.
const IpAddr kRequester = IpAddr::v4(192, 0, 2, 1), kResponder = IpAddr::v4(192, 0, 2, 2);
// 2026-01-01 00:00:00 UTC, then one packet per millisecond: the file is reproducible.
constexpr std::chrono::seconds kEpoch{1767225600};

struct Packet {
  RoceHeaders h;
  std::string payload;
};

// Fills every header opcode `code` carries with recognizable values. PSNs count up
// per QP and direction; a payload names its opcode (lengths vary, so every pad
// count 0..3 occurs).
Packet make_packet(const OpInfo& info, uint32_t psn) {
  Packet p;
  RoceHeaders& h = p.h;
  const bool response = info.is(OpClass::kResponse);
  h.bth.opcode = info.code;
  h.bth.psn = Psn(psn);
  switch (info.transport) {
    case Transport::kRC: h.bth.dest_qpn = Qpn(response ? 0x11 : 0x12); break;
    case Transport::kUC: h.bth.dest_qpn = Qpn(0x22); break;
    case Transport::kUD: h.bth.dest_qpn = Qpn(0x32); break;
    case Transport::kXRC:
    case Transport::kCNP: h.bth.dest_qpn = Qpn(0x42); break;
  }
  h.bth.ack_req = info.is(OpClass::kRequest) && info.is(OpClass::kLast) &&
                  info.transport == Transport::kRC;
  h.bth.se = info.is(OpClass::kSend) && info.is(OpClass::kLast);
  h.deth = {0x11111111, Qpn(0x31)};
  h.reth = {0x00007f5a12340000ull + psn * 0x1000ull, 0x00a1b2c3, 0};
  h.atomic_eth = {0x00007f5a56780008ull, 0x00a1b2c4, 0x1111222233334444ull, 0x5555666677778888ull};
  if (info.code == op::kRcFetchAdd) h.atomic_eth.compare = 0;
  h.aeth = Aeth::ack(psn % 0x1000);
  h.atomic_ack_eth = {0x0123456789abcdefull};
  h.immdt = {0x12345678};
  h.ieth = {0x00a1b2c5};
  if (info.is(OpClass::kPayload)) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "rocelab opcode 0x%02x: %s", info.code,
                  std::string(info.name).c_str());
    p.payload = buf;
  }
  h.reth.dma_len = info.is(OpClass::kRead) ? 4096 : static_cast<uint32_t>(p.payload.size());
  return p;
}

std::vector<Packet> opcode_packets() {
  std::vector<Packet> out;
  uint32_t psn[2][3] = {{1000, 2000, 3000}, {5000, 0, 0}};  // [response][RC, UC, UD]
  for (const OpInfo& info : opcode_table()) {
    if (!info.valid) continue;
    if (info.transport != Transport::kRC && info.transport != Transport::kUC &&
        info.transport != Transport::kUD)
      continue;
    const int t = info.transport == Transport::kRC ? 0 : info.transport == Transport::kUC ? 1 : 2;
    const int r = info.is(OpClass::kResponse) ? 1 : 0;
    out.push_back(make_packet(info, psn[r][t]++));
  }
  // The Acknowledge opcode once more as each kind of NAK the summary counts.
  for (Aeth a : {Aeth::rnr_nak(7, 14), Aeth::nak(7, NakCode::kPsnSeqError),
                 Aeth::nak(7, NakCode::kRemoteAccessError)}) {
    Packet p = make_packet(op_info(op::kRcAck), psn[1][0]++);
    p.h.aeth = a;
    out.push_back(p);
  }
  // After the PSN sequence error NAK the requester resends: a retransmitted PSN.
  out.push_back(make_packet(op_info(op::kRcSendOnly), 1004));
  return out;
}

void write_pcap(const std::string& path) {
  std::string detail;
  auto w = PcapWriter::open(path, PcapWriter::Options{}, &detail);
  if (!w) throw std::runtime_error(path + ": " + w.error().message() + " (" + detail + ")");
  std::vector<std::byte> frame(kMaxFrameLen);
  int i = 0;
  for (const Packet& p : opcode_packets()) {
    IpUdpInfo ip;
    const bool response = p.h.info().is(OpClass::kResponse);
    ip.src = response ? kResponder : kRequester;
    ip.dst = response ? kRequester : kResponder;
    ip.sport = 49152;
    auto payload = std::as_bytes(std::span(p.payload.data(), p.payload.size()));
    auto len = build_frame(frame, ip, p.h, payload);
    if (!len) throw std::runtime_error("encoding " + std::string(p.h.info().name) + ": " +
                                       len.error().message());
    const auto ts = kEpoch + std::chrono::milliseconds(i++);
    if (auto ec = w->write(ts, std::span(frame).first(*len))) throw std::runtime_error(ec.message());
  }
  if (auto ec = w->close()) throw std::runtime_error(path + ": " + ec.message());
  std::printf("wrote %d packets to %s\n", i, path.c_str());
}

}  // namespace

void register_opcodes(CLI::App& app) {
  auto pcap = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("opcodes", "Print the BTH opcode table; --pcap writes one packet "
                                            "of every RC, UC and UD opcode");
  cmd->add_option("--pcap", *pcap,
                  "Write a capture (Ethernet, 192.0.2.1 <-> 192.0.2.2, fixed timestamps) made by "
                  "the encoder, instead of printing the table");
  cmd->callback([pcap] {
    if (pcap->empty()) {
      print_table();
    } else {
      write_pcap(*pcap);
    }
    exit_code() = 0;
  });
}

}  // namespace rocelab::tools
