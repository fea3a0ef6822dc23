// The attackers' packets (tests/attack): the UDP payload (BTH .. ICRC) of a
// RoCEv2 packet from src:sport to dst, its ICRC computed over those headers,
// built by src/wire (build_frame without Ethernet, then the IP/UDP headers cut
// off). Empty when the headers cannot be encoded.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "wire/frame.h"
#include "wire/ip_udp.h"

namespace rocelab::attack {

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
