#include "wire/frame.h"

#include "wire/byte_order.h"
#include "wire/icrc.h"

namespace rocelab::wire {
namespace {

constexpr uint16_t kEtherTypeVlan = 0x8100, kEtherTypeQinQ = 0x88A8;

Result<std::span<const std::byte>> by_ethertype(uint16_t type, std::span<const std::byte> rest) {
  if (type != kEtherTypeIpv4 && type != kEtherTypeIpv6) return WireErrc::kNotRoce;
  return rest;
}

// True when an IP packet that failed to parse (snapped by the capture, or
// damaged) still shows UDP to port 4791 in the bytes we have. Only such a
// packet is a malformed RoCEv2 packet; anything else is not RoCE at all.
bool shows_roce_port(std::span<const std::byte> p) {
  if (p.empty()) return false;
  size_t udp = 0;
  const uint8_t version = load8(p.data()) >> 4;
  if (version == 4 && p.size() >= kIpv4HeaderLen) {
    if (load8(p.data() + 9) != 17) return false;
    udp = size_t{load8(p.data()) & 0x0Fu} * 4;
    if (udp < kIpv4HeaderLen) return false;
  } else if (version == 6 && p.size() >= kIpv6HeaderLen) {
    if (load8(p.data() + 6) != 17) return false;
    udp = kIpv6HeaderLen;
  } else {
    return false;
  }
  return p.size() >= udp + 4 && load_be16(p.data() + udp + 2) == kRoceV2Port;
}

}  // namespace

bool link_type_supported(int link_type) {
  return ip_from_link(link_type, {}).error() != make_error_code(WireErrc::kUnsupportedLinkType);
}

Result<std::span<const std::byte>> ip_from_link(int link_type, std::span<const std::byte> f) {
  switch (static_cast<LinkType>(link_type)) {
    case LinkType::kEthernet: {
      size_t off = 12;
      for (;;) {
        if (f.size() < off + 2) return WireErrc::kTruncated;
        const uint16_t type = load_be16(f.data() + off);
        if (type == kEtherTypeVlan || type == kEtherTypeQinQ) {
          off += 4;
          continue;
        }
        return by_ethertype(type, f.subspan(off + 2));
      }
    }
    case LinkType::kRaw:
    case LinkType::kRawLinktype:
    case LinkType::kIpv4:
    case LinkType::kIpv6:
      return f;
    case LinkType::kLinuxSll:  // 16 bytes; protocol type at 14
      if (f.size() < 16) return WireErrc::kTruncated;
      return by_ethertype(load_be16(f.data() + 14), f.subspan(16));
    case LinkType::kLinuxSll2:  // 20 bytes; protocol type at 0
      if (f.size() < 20) return WireErrc::kTruncated;
      return by_ethertype(load_be16(f.data()), f.subspan(20));
  }
  return WireErrc::kUnsupportedLinkType;
}

Result<DecodedFrame> decode_frame(int link_type, std::span<const std::byte> frame, bool icrc) {
  auto ip = ip_from_link(link_type, frame);
  if (!ip) {
    // A link header too short to say what it carries is not identifiably RoCE.
    if (ip.error() == make_error_code(WireErrc::kTruncated)) return WireErrc::kNotRoce;
    return ip.error();
  }
  auto ipu = parse_ip_udp(*ip);
  if (!ipu) {
    if (ipu.error() != make_error_code(WireErrc::kNotRoce) && !shows_roce_port(*ip))
      return WireErrc::kNotRoce;  // e.g. a snapped TCP packet: not ours to call malformed
    return ipu.error();
  }
  if (ipu->info.dport != kRoceV2Port) return WireErrc::kNotRoce;
  auto roce = parse_roce(ipu->udp_payload);
  if (!roce) return roce.error();
  DecodedFrame d{*ipu, *roce, 0};
  d.icrc_computed = icrc ? compute_icrc(ipu->ip_packet, ipu->info.ip_header_len) : roce->icrc;
  return d;
}

Result<size_t> build_frame(std::span<std::byte> out, const IpUdpInfo& ip, const RoceHeaders& h,
                           std::span<const std::byte> payload, bool with_ethernet) {
  const size_t eth = with_ethernet ? kEthHeaderLen : 0;
  const size_t iph = ip_udp_header_len(ip.dst.v6);
  if (out.size() < eth + iph) return WireErrc::kBufferTooSmall;
  auto len = encode_roce(out.subspan(eth + iph), h, payload);
  if (!len) return len.error();
  if (with_ethernet) {
    write_ethernet(out.data(), mac_for(ip.dst), mac_for(ip.src),
                   ip.dst.v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  }
  write_ip_udp(out.data() + eth, ip, *len);
  const auto ip_packet = out.subspan(eth, iph + *len);
  const size_t ip_hlen = ip.dst.v6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  store_le32(out.data() + eth + iph + *len - kIcrcLen, compute_icrc(ip_packet, ip_hlen));
  return eth + iph + *len;
}

}  // namespace rocelab::wire
