#include "wire/icrc.h"

#include <zlib.h>

#include <cstring>

#include "wire/opcode_table.h"
#include "wire/ip_udp.h"

namespace rocelab::wire {
namespace {

uInt crc_seed() {
  // The CRC state after 8 bytes of 0xFF: the masked LRH of a native IB packet.
  static const uInt seed = [] {
    const Bytef ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    return static_cast<uInt>(crc32(0, ones, 8));
  }();
  return seed;
}

uint32_t crc_add(uint32_t crc, const std::byte* p, size_t n) {
  return static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
}

}  // namespace

IcrcAccumulator::IcrcAccumulator(const std::byte* ip_udp, size_t ip_hlen, const std::byte* bth) {
  // Largest masked prefix: IPv4 with 40 bytes of options + UDP + BTH = 80 bytes.
  std::byte buf[60 + kUdpHeaderLen + kBthLen];
  const size_t n = ip_hlen + kUdpHeaderLen;
  std::memcpy(buf, ip_udp, n);
  const std::byte ff{0xFF};
  const uint8_t version = static_cast<uint8_t>(buf[0]) >> 4;
  if (version == 4) {
    buf[1] = ff;                  // TOS
    buf[8] = ff;                  // TTL
    buf[10] = buf[11] = ff;       // header checksum
  } else {
    // version(4) | traffic class(8) | flow label(20): keep the version nibble.
    buf[0] = std::byte{0x6F};
    buf[1] = buf[2] = buf[3] = ff;
    buf[7] = ff;                  // hop limit
  }
  buf[ip_hlen + 6] = buf[ip_hlen + 7] = ff;  // UDP checksum
  std::memcpy(buf + n, bth, kBthLen);
  buf[n + 4] = ff;                // BTH FECN/BECN/reserved
  crc_ = crc_add(crc_seed(), buf, n + kBthLen);
}

void IcrcAccumulator::add(std::span<const std::byte> bytes) {
  crc_ = crc_add(crc_, bytes.data(), bytes.size());
}

uint32_t compute_icrc(std::span<const std::byte> ip_packet, size_t ip_hlen) {
  const size_t hdrs = ip_hlen + kUdpHeaderLen;
  IcrcAccumulator acc(ip_packet.data(), ip_hlen, ip_packet.data() + hdrs);
  const size_t rest_begin = hdrs + kBthLen;
  acc.add(ip_packet.subspan(rest_begin, ip_packet.size() - rest_begin - kIcrcLen));
  return acc.value();
}

}  // namespace rocelab::wire
