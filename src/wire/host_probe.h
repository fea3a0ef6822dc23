// The control datagram of the processes that share one address's UDP port
// 4791 (src/host/address_group.h): a probe that finds out which socket of the
// SO_REUSEPORT group a process holds. It goes to <address>:4791 like a RoCEv2
// packet, is steered by the group's program to the socket whose index it
// names, and never reaches a verbs engine (UdpTransport::set_control_handler).
//
//  bytes 0-3    magic 0xFF 'R' 'L' 'H'  (as a BTH: opcode 0xFF, a
//               manufacturer-specific opcode rocelab never sends)
//  byte  4      the socket index the probe is for (the program returns it)
//  bytes 5-7    reserved, 0
//  bytes 8-15   the group's cookie (a random number in its table)
//  bytes 16-19  the probe generation
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "wire/byte_order.h"

namespace rocelab::wire {

inline constexpr uint32_t kHostProbeMagic = 0xFF524C48;  // 0xFF 'R' 'L' 'H'
inline constexpr size_t kHostProbeLen = 20;
inline constexpr size_t kHostProbeIndexOffset = 4;

struct HostProbe {
  uint8_t index = 0;
  uint64_t cookie = 0;
  uint32_t generation = 0;
};

inline void put_host_probe(const HostProbe& p, std::span<std::byte, kHostProbeLen> out) {
  for (std::byte& b : out) b = std::byte{0};
  store_be32(out.data(), kHostProbeMagic);
  store8(out.data() + kHostProbeIndexOffset, p.index);
  store_be32(out.data() + 8, static_cast<uint32_t>(p.cookie >> 32));
  store_be32(out.data() + 12, static_cast<uint32_t>(p.cookie));
  store_be32(out.data() + 16, p.generation);
}

// nullopt for anything that is not a whole probe.
inline std::optional<HostProbe> parse_host_probe(std::span<const std::byte> in) {
  if (in.size() != kHostProbeLen || load_be32(in.data()) != kHostProbeMagic) return std::nullopt;
  HostProbe p;
  p.index = load8(in.data() + kHostProbeIndexOffset);
  p.cookie = (uint64_t{load_be32(in.data() + 8)} << 32) | load_be32(in.data() + 12);
  p.generation = load_be32(in.data() + 16);
  return p;
}

}  // namespace rocelab::wire
