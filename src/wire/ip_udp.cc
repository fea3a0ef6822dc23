#include "wire/ip_udp.h"

#include <arpa/inet.h>

#include <cstring>

#include "wire/byte_order.h"

namespace rocelab::wire {

IpAddr IpAddr::from_v4_u32(uint32_t h) {
  return v4(static_cast<uint8_t>(h >> 24), static_cast<uint8_t>(h >> 16),
            static_cast<uint8_t>(h >> 8), static_cast<uint8_t>(h));
}

uint32_t IpAddr::v4_u32() const {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

std::array<uint8_t, 16> IpAddr::gid() const {
  if (v6) return b;
  std::array<uint8_t, 16> g{};
  g[10] = g[11] = 0xFF;
  std::memcpy(&g[12], b.data(), 4);
  return g;
}

IpAddr IpAddr::from_gid(const std::array<uint8_t, 16>& g) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  IpAddr a;
  if (std::memcmp(g.data(), kMapped, 12) == 0) {
    std::memcpy(a.b.data(), &g[12], 4);
  } else {
    a.v6 = true;
    a.b = g;
  }
  return a;
}

std::string IpAddr::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, b.data(), buf, sizeof buf);
  return buf;
}

Result<IpAddr> IpAddr::parse(const std::string& text) {
  IpAddr a;
  if (inet_pton(AF_INET, text.c_str(), a.b.data()) == 1) return a;
  a.v6 = true;
  if (inet_pton(AF_INET6, text.c_str(), a.b.data()) == 1) return a;
  return WireErrc::kBadIpHeader;
}

namespace {

uint16_t ipv4_checksum(const std::byte* h, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) sum += load_be16(h + i);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

void write_ip_udp(std::byte* out, const IpUdpInfo& in, size_t udp_payload_len) {
  const size_t udp_len = kUdpHeaderLen + udp_payload_len;
  std::byte* udp;
  if (!in.dst.v6) {
    std::byte* ip = out;
    store8(ip, 0x45);
    store8(ip + 1, in.tclass);
    store_be16(ip + 2, static_cast<uint16_t>(kIpv4HeaderLen + udp_len));
    store_be16(ip + 4, in.ip_id);
    store_be16(ip + 6, in.df ? 0x4000 : 0);
    store8(ip + 8, in.ttl);
    store8(ip + 9, 17);  // UDP
    store_be16(ip + 10, 0);
    std::memcpy(ip + 12, in.src.b.data(), 4);
    std::memcpy(ip + 16, in.dst.b.data(), 4);
    store_be16(ip + 10, ipv4_checksum(ip, kIpv4HeaderLen));
    udp = out + kIpv4HeaderLen;
  } else {
    std::byte* ip = out;
    store_be32(ip, (6u << 28) | (uint32_t{in.tclass} << 20) | (in.flow_label & 0xFFFFF));
    store_be16(ip + 4, static_cast<uint16_t>(udp_len));
    store8(ip + 6, 17);
    store8(ip + 7, in.ttl);
    std::memcpy(ip + 8, in.src.b.data(), 16);
    std::memcpy(ip + 24, in.dst.b.data(), 16);
    udp = out + kIpv6HeaderLen;
  }
  store_be16(udp, in.sport);
  store_be16(udp + 2, in.dport);
  store_be16(udp + 4, static_cast<uint16_t>(udp_len));
  store_be16(udp + 6, 0);  // RoCEv2 allows a zero UDP checksum (as rxe sends)
}

void write_ethernet(std::byte* out, const std::array<uint8_t, 6>& dst,
                    const std::array<uint8_t, 6>& src, uint16_t ethertype) {
  std::memcpy(out, dst.data(), 6);
  std::memcpy(out + 6, src.data(), 6);
  store_be16(out + 12, ethertype);
}

std::array<uint8_t, 6> mac_for(const IpAddr& a) {
  const uint8_t* t = a.v6 ? &a.b[12] : &a.b[0];
  return {0x02, 0x00, t[0], t[1], t[2], t[3]};
}

Result<IpUdpPacket> parse_ip_udp(std::span<const std::byte> p) {
  if (p.empty()) return WireErrc::kTruncated;
  IpUdpPacket r;
  IpUdpInfo& in = r.info;
  const uint8_t version = load8(p.data()) >> 4;
  size_t ip_hlen = 0, total = 0;
  if (version == 4) {
    if (p.size() < kIpv4HeaderLen) return WireErrc::kTruncated;
    ip_hlen = size_t{load8(p.data()) & 0x0Fu} * 4;
    if (ip_hlen < kIpv4HeaderLen) return WireErrc::kBadIpHeader;
    total = load_be16(p.data() + 2);
    if (total < ip_hlen) return WireErrc::kBadIpHeader;
    if (p.size() < total) return WireErrc::kTruncated;
    if (load8(p.data() + 9) != 17) return WireErrc::kNotRoce;
    const uint16_t frag = load_be16(p.data() + 6);
    if (frag & 0x3FFF) return WireErrc::kNotRoce;  // MF or a fragment offset
    in.tclass = load8(p.data() + 1);
    in.ip_id = load_be16(p.data() + 4);
    in.df = frag & 0x4000;
    in.ttl = load8(p.data() + 8);
    std::memcpy(in.src.b.data(), p.data() + 12, 4);
    std::memcpy(in.dst.b.data(), p.data() + 16, 4);
  } else if (version == 6) {
    if (p.size() < kIpv6HeaderLen) return WireErrc::kTruncated;
    ip_hlen = kIpv6HeaderLen;
    total = kIpv6HeaderLen + load_be16(p.data() + 4);
    if (p.size() < total) return WireErrc::kTruncated;
    if (load8(p.data() + 6) != 17) return WireErrc::kNotRoce;  // no extension headers
    const uint32_t w = load_be32(p.data());
    in.tclass = static_cast<uint8_t>(w >> 20);
    in.flow_label = w & 0xFFFFF;
    in.ttl = load8(p.data() + 7);
    in.src.v6 = in.dst.v6 = true;
    std::memcpy(in.src.b.data(), p.data() + 8, 16);
    std::memcpy(in.dst.b.data(), p.data() + 24, 16);
  } else {
    return WireErrc::kBadIpHeader;
  }
  in.ip_header_len = static_cast<uint8_t>(ip_hlen);
  if (total < ip_hlen + kUdpHeaderLen) return WireErrc::kTruncated;
  const std::byte* udp = p.data() + ip_hlen;
  in.sport = load_be16(udp);
  in.dport = load_be16(udp + 2);
  const size_t udp_len = load_be16(udp + 4);
  in.udp_checksum = load_be16(udp + 6);
  if (udp_len < kUdpHeaderLen || ip_hlen + udp_len > total) return WireErrc::kBadUdpHeader;
  r.ip_packet = p.first(ip_hlen + udp_len);
  r.udp_payload = p.subspan(ip_hlen + kUdpHeaderLen, udp_len - kUdpHeaderLen);
  return r;
}

}  // namespace rocelab::wire
