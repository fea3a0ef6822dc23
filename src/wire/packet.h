// The RoCEv2 transport packet: what follows the UDP header (BTH, extension
// headers, payload, pad, ICRC). Encode and decode read the opcode table.
#pragma once
#include <cstddef>
#include <span>

#include "wire/aeth.h"
#include "wire/atomic_eth.h"
#include "wire/bth.h"
#include "wire/deth.h"
#include "wire/error.h"
#include "wire/ieth.h"
#include "wire/immdt.h"
#include "wire/opcode_table.h"
#include "wire/reth.h"
#include "wire/xrceth.h"

namespace rocelab::wire {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

struct BthFields {
  uint8_t opcode = 0;
  bool se = false;
  bool mig_req = false;
  uint8_t pad_count = 0;  // set by the encoder from the payload length
  uint8_t tver = 0;
  uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;
  Qpn dest_qpn;
  bool ack_req = false;
  Psn psn;
  bool operator==(const BthFields&) const = default;
};

// Every header a packet may carry; which ones are meaningful is op_info(bth.opcode).hdrs.
struct RoceHeaders {
  BthFields bth;
  Deth deth;
  XrcEth xrceth;
  Reth reth;
  AtomicEth atomic_eth;
  Aeth aeth;
  AtomicAckEth atomic_ack_eth;
  ImmDt immdt;
  Ieth ieth;

  const OpInfo& info() const { return op_info(bth.opcode); }
};

// A decoded transport packet. payload excludes the pad bytes and the ICRC;
// it points into the buffer that was parsed.
struct RocePacket {
  RoceHeaders hdr;
  std::span<const std::byte> payload;
  uint32_t icrc = 0;  // as carried on the wire (stored little-endian)
};

// Largest transport packet: BTH + the longest header set + MTU payload + pad + ICRC.
inline constexpr size_t kMaxRoceLen = kBthLen + 64 + kMaxMtu + 3 + kIcrcLen;

// Parses a UDP payload. Never reads out of bounds; errors: kTruncated, kOversized,
// kBadTVer, kUnknownOpcode, kBadPadCount, kUnexpectedPayload. Does not check the
// ICRC (it needs the IP header).
Result<RocePacket> parse_roce(std::span<const std::byte> udp_payload);

// Writes BTH and extension headers for h into out; returns their length.
// pad_count is written as given: encode_roce() sets it from the payload.
Result<size_t> encode_headers(std::span<std::byte> out, const RoceHeaders& h);

// Writes headers, payload and zeroed pad, and leaves 4 zero bytes for the ICRC.
// Returns the total transport length (what goes into the UDP payload). Errors:
// kUnknownOpcode, kPayloadTooLarge, kUnexpectedPayload, kBufferTooSmall.
Result<size_t> encode_roce(std::span<std::byte> out, RoceHeaders h,
                           std::span<const std::byte> payload);

// Pad count for a payload of n bytes: the packet is a multiple of 4 (IBTA 9.2.1).
constexpr uint8_t pad_for(size_t n) { return static_cast<uint8_t>((4 - (n & 3)) & 3); }

}  // namespace rocelab::wire
