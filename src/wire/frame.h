// Whole frames: link layer + IP + UDP + RoCEv2 transport packet. Used by the pcap
// reader and writer, `rocelab decode`, and the engine's pcap tap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/error.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace rocelab::wire {

// What an Ethernet link carries for a frame beyond its IP packet: the 14-byte
// header, 4-byte FCS, 8-byte preamble and 12-byte inter-frame gap. What a
// link's rate is spent on, and what a pacer counts.
inline constexpr uint32_t kEthernetWireOverhead = 14 + 4 + 8 + 12;

// Link types (the libpcap DLT_/LINKTYPE_ values) that decode_frame understands.
enum class LinkType : int {
  kEthernet = 1,     // DLT_EN10MB
  kRaw = 12,         // DLT_RAW on Linux (LINKTYPE_RAW is 101)
  kRawLinktype = 101,
  kLinuxSll = 113,   // tcpdump -i any (cooked v1)
  kIpv4 = 228,
  kIpv6 = 229,
  kLinuxSll2 = 276,  // tcpdump -i any (cooked v2)
};

// True for the link types ip_from_link() understands.
bool link_type_supported(int link_type);

struct DecodedFrame {
  IpUdpPacket ip;
  RocePacket roce;
  uint32_t icrc_computed = 0;
  bool icrc_ok() const { return icrc_computed == roce.icrc; }
};

// Finds the IP packet inside a link-layer frame (Ethernet with up to two VLAN tags,
// raw IP, Linux cooked SLL/SLL2). kNotRoce for non-IP frames.
Result<std::span<const std::byte>> ip_from_link(int link_type, std::span<const std::byte> frame);

// Decodes a frame: kNotRoce when it is not UDP to port 4791 (or is not IP at all,
// or too damaged or snapped to tell); IP/UDP errors when it shows UDP port 4791
// but its headers are inconsistent or cut; transport errors from parse_roce. The ICRC is computed, not judged:
// check icrc_ok(). With compute_icrc false it is not computed either (icrc_computed is the carried
// ICRC, icrc_ok() true): for readers that do not judge it (rocelab replay), a CRC over each packet less.
Result<DecodedFrame> decode_frame(int link_type, std::span<const std::byte> frame, bool compute_icrc = true);

// Builds IP + UDP + transport packet + ICRC into out (preceded by a synthesized
// Ethernet header when with_ethernet). pad_count and the UDP/IP lengths are set
// here. Returns the frame length.
Result<size_t> build_frame(std::span<std::byte> out, const IpUdpInfo& ip, const RoceHeaders& h,
                           std::span<const std::byte> payload, bool with_ethernet = true);

inline constexpr size_t kMaxFrameLen = kEthHeaderLen + kIpv6HeaderLen + kUdpHeaderLen + kMaxRoceLen;

}  // namespace rocelab::wire
