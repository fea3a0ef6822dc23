// Native InfiniBand packets, as Endace ERF captures (link type DLT_ERF, record
// type 21 INFINIBAND) carry them: not RoCEv2, but the same transport headers.
//
//   LRH (8) | GRH (40, when LNH = 3) | BTH | ext. headers | payload | pad | ICRC (4) | VCRC (2)
//
// LRH, Local Route Header (IBTA 7.7):
//   byte 0  VL(4) | LVer(4)         byte 1  SL(4) | reserved(2) | LNH(2)
//   2-3     DLID                    4-5     reserved(5) | PktLen(11): LRH..ICRC in 4-byte words
//   6-7     SLID
// LNH (link next header): 0 raw, 1 IPv6 (non-IBA), 2 IBA local (BTH), 3 IBA global (GRH, BTH).
//
// The native ICRC (IBTA 7.8.1) is RoCEv2's CRC with the LRH in place of the 8
// bytes of ones: only its VL is masked in a local packet; a global packet,
// whose LRH routers rewrite, masks the whole LRH (hence RoCEv2's 0xFF x 8) and
// the GRH's traffic class, flow label and hop limit. Verified on every packet of
// shared/traces/public/srinivaskoritala_infiniband.pcap. The VCRC (a link-level
// CRC-16) is reported, not checked.
#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "wire/error.h"
#include "wire/packet.h"

namespace rocelab::wire {

inline constexpr int kLinkTypeErf = 197;  // DLT_ERF
inline constexpr size_t kLrhLen = 8, kGrhLen = 40, kVcrcLen = 2;

struct Lrh {
  uint8_t vl = 0, lver = 0, sl = 0, lnh = 0;
  uint16_t dlid = 0, slid = 0;
  uint16_t pkt_len = 0;  // 4-byte words from the LRH to the ICRC
};

struct Grh {
  uint8_t tclass = 0, next_hdr = 0, hop_limit = 0;
  uint32_t flow_label = 0;
  std::array<uint8_t, 16> sgid{}, dgid{};
};

struct IbFrame {
  Lrh lrh;
  bool has_grh = false;
  Grh grh;
  RocePacket roce;
  uint32_t icrc_computed = 0;
  uint16_t vcrc = 0;
  bool icrc_ok() const { return icrc_computed == roce.icrc; }
};

// One ERF record: its type (7 bits) and what follows the 16-byte header and any
// extension headers, cut to the record's wire length. An Ethernet record
// (type 2) has 2 bytes of offset/pad before the frame. kTruncated when even the
// headers are cut.
inline constexpr uint8_t kErfTypeEthernet = 2, kErfTypeInfiniband = 21;
inline constexpr size_t kErfEthPadLen = 2;
struct ErfRecord {
  uint8_t type = 0;
  std::span<const std::byte> payload;
};
Result<ErfRecord> parse_erf(std::span<const std::byte> record);

// Decodes LRH, GRH and the transport packet and computes the ICRC. kNotRoce for
// LNH 0/1 (no IBA transport); kTruncated when PktLen does not fit; transport
// errors from parse_roce.
Result<IbFrame> decode_ib(std::span<const std::byte> packet);

}  // namespace rocelab::wire
