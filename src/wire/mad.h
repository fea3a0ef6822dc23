// The common MAD header (IBTA Vol 1 13.4.2), the first 24 of a MAD's 256 bytes:
//  byte 0      BaseVersion (1)
//  byte 1      MgmtClass (0x07: Communication Management)
//  byte 2      ClassVersion (2 for CM)
//  byte 3      R(0x80) | Method(0x7F)        (the R bit is part of the method byte: 0x81 GetResp)
//  bytes 4-5   Status
//  bytes 6-7   ClassSpecific
//  bytes 8-15  TransactionID
//  bytes 16-17 AttributeID
//  bytes 18-19 reserved
//  bytes 20-23 AttributeModifier
// MADs travel as the 256-byte payload of a UD SEND Only to QP 1 (gsi.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/byte_order.h"
#include "wire/error.h"

namespace rocelab::wire {

inline constexpr size_t kMadLen = 256, kMadHeaderLen = 24;
inline constexpr uint8_t kMadBaseVersion = 1;

// Management classes (IBTA Table 110) that a RoCE capture is likely to show.
enum class MgmtClass : uint8_t {
  kSubnAdm = 0x03,   // SA (native IB only)
  kPerf = 0x04,
  kCm = 0x07,
};

// Methods (IBTA Table 111); the values include the R bit.
namespace mad_method {
inline constexpr uint8_t kGet = 0x01, kSet = 0x02, kSend = 0x03, kTrap = 0x05,
                         kGetResp = 0x81;
}

struct MadHeader {
  uint8_t base_version = kMadBaseVersion;
  uint8_t mgmt_class = 0;
  uint8_t class_version = 0;
  uint8_t method = 0;  // with the R bit
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;

  static MadHeader load(const std::byte* p) {
    MadHeader h;
    h.base_version = load8(p);
    h.mgmt_class = load8(p + 1);
    h.class_version = load8(p + 2);
    h.method = load8(p + 3);
    h.status = load_be16(p + 4);
    h.class_specific = load_be16(p + 6);
    h.tid = load_be64(p + 8);
    h.attr_id = load_be16(p + 16);
    h.attr_mod = load_be32(p + 20);
    return h;
  }
  void store(std::byte* p) const {
    store8(p, base_version);
    store8(p + 1, mgmt_class);
    store8(p + 2, class_version);
    store8(p + 3, method);
    store_be16(p + 4, status);
    store_be16(p + 6, class_specific);
    store_be64(p + 8, tid);
    store_be16(p + 16, attr_id);
    store_be16(p + 18, 0);
    store_be32(p + 20, attr_mod);
  }
  bool operator==(const MadHeader&) const = default;
};

// Reads the common header of any MAD. Errors: kTruncated (fewer than 24
// bytes), kBadMad (base version not 1: not a MAD we can read).
inline Result<MadHeader> parse_mad_header(std::span<const std::byte> mad) {
  if (mad.size() < kMadHeaderLen) return WireErrc::kTruncated;
  MadHeader h = MadHeader::load(mad.data());
  if (h.base_version != kMadBaseVersion) return WireErrc::kBadMad;
  return h;
}

}  // namespace rocelab::wire
