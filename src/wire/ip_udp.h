// IPv4 / IPv6 and UDP headers around a RoCEv2 transport packet, and the
// Ethernet header the pcap writer synthesizes. src/wire depends on nothing of
// ours, so addresses are plain bytes here (the engine converts to Asio types).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "wire/error.h"

namespace rocelab::wire {

struct IpAddr {
  bool v6 = false;
  std::array<uint8_t, 16> b{};  // IPv4 uses b[0..3]

  static IpAddr v4(uint8_t a, uint8_t b1, uint8_t c, uint8_t d) {
    IpAddr r;
    r.b[0] = a; r.b[1] = b1; r.b[2] = c; r.b[3] = d;
    return r;
  }
  static IpAddr from_v4_u32(uint32_t host_order);
  uint32_t v4_u32() const;  // host order
  // The RoCEv2 GID: IPv4-mapped ::ffff:a.b.c.d, or the IPv6 address itself.
  std::array<uint8_t, 16> gid() const;
  static IpAddr from_gid(const std::array<uint8_t, 16>& gid);
  std::string to_string() const;
  // A multicast address: 224.0.0.0/4 or ff00::/8.
  bool is_multicast() const { return v6 ? b[0] == 0xFF : (b[0] & 0xF0) == 0xE0; }
  // 127.0.0.0/8 or ::1.
  bool is_loopback() const {
    if (!v6) return b[0] == 127;
    for (int i = 0; i < 15; ++i)
      if (b[i] != 0) return false;
    return b[15] == 1;
  }
  static Result<IpAddr> parse(const std::string& text);
  bool operator==(const IpAddr&) const = default;
};

inline constexpr size_t kIpv4HeaderLen = 20, kIpv6HeaderLen = 40, kUdpHeaderLen = 8,
                        kEthHeaderLen = 14;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800, kEtherTypeIpv6 = 0x86DD;

// What the IP and UDP headers of a RoCEv2 packet carry.
struct IpUdpInfo {
  IpAddr src, dst;
  uint16_t sport = 0xC000, dport = 4791;
  uint8_t tclass = 0;        // IPv4 TOS / IPv6 traffic class (DSCP|ECN)
  uint8_t ttl = 64;          // IPv4 TTL / IPv6 hop limit
  uint16_t ip_id = 0;        // IPv4 identification
  bool df = true;            // IPv4 don't-fragment
  uint32_t flow_label = 0;   // IPv6
  uint16_t udp_checksum = 0; // as received; written as 0 (allowed for RoCEv2)
  uint8_t ip_header_len = kIpv4HeaderLen;  // including IPv4 options, as received
};

constexpr size_t ip_udp_header_len(bool v6) {
  return (v6 ? kIpv6HeaderLen : kIpv4HeaderLen) + kUdpHeaderLen;
}

// Writes IP and UDP headers (IPv4 header checksum computed, UDP checksum 0) for a
// UDP payload of udp_payload_len bytes. out must hold ip_udp_header_len(v6) bytes.
void write_ip_udp(std::byte* out, const IpUdpInfo& info, size_t udp_payload_len);

// Writes a 14-byte Ethernet II header.
void write_ethernet(std::byte* out, const std::array<uint8_t, 6>& dst,
                    const std::array<uint8_t, 6>& src, uint16_t ethertype);

// A locally administered MAC derived from an IP address (for synthesized frames).
std::array<uint8_t, 6> mac_for(const IpAddr& a);

struct IpUdpPacket {
  IpUdpInfo info;
  std::span<const std::byte> ip_packet;    // from the IP header to the end of the UDP payload
  std::span<const std::byte> udp_payload;
};

// Parses an IP packet (IPv4 or IPv6) carrying UDP. Trailing bytes beyond the IP
// total length (Ethernet padding) are cut off. Errors: kTruncated, kBadIpHeader,
// kBadUdpHeader, kNotRoce (not UDP, or a fragment).
Result<IpUdpPacket> parse_ip_udp(std::span<const std::byte> ip_packet);

}  // namespace rocelab::wire
