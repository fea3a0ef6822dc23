// The attackers' packets (tests/attack): the UDP payload (BTH .. ICRC) of a
// RoCEv2 packet from src:sport to dst, its ICRC computed over those headers,
// built by src/wire (build_frame without Ethernet, then the IP/UDP headers cut
// off). Empty when the headers cannot be encoded.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "wire/frame.h"
#include "wire/ip_udp.h"

namespace rocelab::attack {

// The attackers' seeded generator (splitmix64): the same packets every run.
struct Rng {  // splitmix64
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};


inline std::vector<std::byte> udp_payload(const wire::IpAddr& src, uint16_t sport, const wire::IpAddr& dst,
                                          const wire::RoceHeaders& h, std::span<const std::byte> payload) {
  wire::IpUdpInfo ip;
  ip.src = src;
  ip.dst = dst;
  ip.sport = sport;
  std::vector<std::byte> frame(wire::kMaxFrameLen);
  auto n = wire::build_frame(frame, ip, h, payload, /*with_ethernet=*/false);
  if (!n) return {};
  const size_t hdrs = wire::ip_udp_header_len(dst.v6);
  return {frame.begin() + static_cast<std::ptrdiff_t>(hdrs), frame.begin() + static_cast<std::ptrdiff_t>(*n)};
}

}  // namespace rocelab::attack
