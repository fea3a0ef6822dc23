// The RoCEv2 Invariant CRC (IBTA annex A17.3.3, as rxe_icrc.c computes it).
//
// CRC-32 (the Ethernet polynomial, reflected) over:
//   8 bytes of 0xFF       - stands in for the masked LRH of native InfiniBand
//   the IP header          - IPv4: TOS, TTL and header checksum set to all ones;
//                            IPv6: traffic class, flow label and hop limit all ones
//   the UDP header         - checksum all ones
//   the BTH                - byte 4 (FECN, BECN, reserved) all ones
//   everything after the BTH up to the ICRC (extension headers, payload, pad)
// The result (with the usual final inversion) is stored little-endian in the
// packet's last 4 bytes. The IPv4 identification, flags and total length are NOT
// masked: the sender must know the ID the kernel will put on the wire.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rocelab::wire {

struct IpUdpInfo;

// Incremental ICRC: start with the IP + UDP + BTH headers, then add the rest of
// the packet piece by piece (a scatter list needs no copy).
class IcrcAccumulator {
 public:
  // ip_udp: the IP header (ip_header_len bytes, options included) followed by the
  // UDP header; bth: the 12-byte BTH.
  IcrcAccumulator(const std::byte* ip_udp, size_t ip_header_len, const std::byte* bth);
  void add(std::span<const std::byte> bytes);
  uint32_t value() const { return crc_; }

 private:
  uint32_t crc_;
};

// What a receiver on a UDP socket cannot see of an IPv4 header, yet the ICRC
// covers: the Identification and the DF flag. Senders put anything there
// (Linux with an unconnected DF socket: ID 0; the kernel's Soft-RoCE and NICs: a
// running counter), so a receiver that assumed 0 would drop their packets.
struct Ipv4Unseen {
  uint16_t id = 0;
  bool df = false;
};

// The CRC is affine over GF(2): flipping a bit of the input flips a fixed set
// of bits of the result, which depends only on how many bytes follow that bit.
// So the 17 unseen bits are determined by the carried ICRC: given
//   delta = carried ICRC XOR the ICRC computed over the header as assumed
// and rest_len, the bytes after the BTH up to the ICRC (extension headers,
// payload, pad), this solves exactly for what to XOR into the assumed ID and
// DF to get the sender's (with an assumed ID of 0: the ID itself). nullopt
// when no value of the 17 bits explains delta: the packet is damaged. (That
// leaves 15 of the 32 bits to catch corruption: a random error passes with
// probability 2^-15.)
std::optional<Ipv4Unseen> solve_ipv4_unseen(uint32_t delta, size_t ip_header_len, size_t rest_len);

// What to XOR into the ICRC of an IPv4 RoCEv2 packet computed with IPv4
// Identification 0 to make it the ICRC of the same packet with Identification
// `id` (the same affine property as above). rest_len as above. For a sender
// whose datagrams the kernel segments (UDP GSO): segment k of a run leaves
// with ID k, so its ICRC must be the one for ID k.
uint32_t ipv4_id_icrc_delta(uint16_t id, size_t ip_header_len, size_t rest_len);

// ICRC of an IP packet that carries a RoCEv2 packet (IP header to the end of the
// UDP payload, whose last 4 bytes are the ICRC slot and are not covered).
// Precondition: the packet parsed with parse_ip_udp and parse_roce.
uint32_t compute_icrc(std::span<const std::byte> ip_packet, size_t ip_header_len);

// ICRC of a RoCEv2 packet (BTH .. ICRC slot: the UDP payload) under the IP and
// UDP headers `ip` describes, as write_ip_udp writes them. Precondition:
// roce.size() >= kBthLen + kIcrcLen.
uint32_t roce_icrc(const IpUdpInfo& ip, std::span<const std::byte> roce);

}  // namespace rocelab::wire
