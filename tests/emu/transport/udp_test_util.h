// Helpers shared by the UDP transport tests: RoCEv2 frames and bounded waits.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "emu/transport/udp_transport.h"
#include "wire/frame.h"

namespace rocelab::emu::test {

// A RoCEv2 packet built for exactly `ip` (ICRC over IPv4 ID 0, DF): the whole
// IP packet, and the UDP payload inside it.
struct Frame {
  wire::IpUdpInfo ip;
  std::vector<std::byte> ip_packet;
  std::span<const std::byte> udp_payload() const {
    return std::span(ip_packet).subspan(wire::ip_udp_header_len(ip.src.v6));
  }
};

inline Frame make_frame(const wire::IpUdpInfo& ip, uint8_t opcode, uint32_t psn, size_t payload_len) {
  wire::RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qpn = wire::Qpn(0x11);
  h.bth.psn = wire::Psn(psn);
  h.bth.ack_req = true;
  h.reth = {0x1000, 0x1234, static_cast<uint32_t>(payload_len)};
  h.aeth = wire::Aeth::ack(psn);
  // Opcodes that carry no payload (ACK, READ request, atomics) get none: the encoder refuses it.
  if (!wire::op_info(opcode).is(wire::OpClass::kPayload)) payload_len = 0;
  std::vector<std::byte> payload(payload_len);
  for (size_t i = 0; i < payload_len; ++i) payload[i] = std::byte(static_cast<uint8_t>(psn + i));
  Frame f;
  f.ip = ip;
  f.ip_packet.resize(wire::kMaxFrameLen);
  auto len = wire::build_frame(f.ip_packet, ip, h, payload, /*with_ethernet=*/false);
  EXPECT_TRUE(len) << len.error().message();
  f.ip_packet.resize(len ? *len : 0);
  return f;
}

// The datagrams point into frames: keep them alive while the datagrams are used.
std::vector<Datagram> datagrams(std::vector<Frame>&& frames) = delete;
inline std::vector<Datagram> datagrams(const std::vector<Frame>& frames) {
  std::vector<Datagram> out;
  for (const Frame& f : frames) out.push_back({f.ip, f.udp_payload()});
  return out;
}

// Polls t (waiting in between) until `want` datagrams arrived or 10 s passed;
// the bound only keeps a broken transport from hanging the test.
inline std::vector<std::pair<wire::IpUdpInfo, std::vector<std::byte>>> receive(Transport& t,
                                                                              size_t want) {
  std::vector<std::pair<wire::IpUdpInfo, std::vector<std::byte>>> got;
  const Nanos give_up = t.now() + std::chrono::seconds(10);
  while (got.size() < want && t.now() < give_up) {
    t.poll([&](const Datagram& d) {
      got.emplace_back(d.ip, std::vector<std::byte>(d.payload.begin(), d.payload.end()));
    });
    if (got.size() < want) t.wait(std::min(give_up, t.now() + std::chrono::milliseconds(100)));
  }
  return got;
}

}  // namespace rocelab::emu::test
