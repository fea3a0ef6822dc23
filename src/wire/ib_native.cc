#include "wire/ib_native.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "wire/byte_order.h"

namespace rocelab::wire {
namespace {

constexpr size_t kErfHeaderLen = 16, kErfExtLen = 8;

}  // namespace

Result<ErfRecord> parse_erf(std::span<const std::byte> r) {
  if (r.size() < kErfHeaderLen) return WireErrc::kTruncated;
  const uint8_t type = load8(r.data() + 8);
  const size_t wlen = load_be16(r.data() + 14);
  size_t off = kErfHeaderLen;
  // Type bit 7: an extension header follows; each one's bit 7 says another follows.
  for (bool more = type & 0x80; more;) {
    if (r.size() < off + kErfExtLen) return WireErrc::kTruncated;
    more = load8(r.data() + off) & 0x80;
    off += kErfExtLen;
  }
  const uint8_t t = type & 0x7F;
  // A snapped record holds less than wlen: what decodes after it is checked by length.
  const size_t want = wlen + (t == kErfTypeEthernet ? kErfEthPadLen : 0);
  return ErfRecord{t, r.subspan(off, std::min(want, r.size() - off))};
}

Result<IbFrame> decode_ib(std::span<const std::byte> p) {
  if (p.size() < kLrhLen) return WireErrc::kTruncated;
  IbFrame f;
  Lrh& l = f.lrh;
  l.vl = load8(p.data()) >> 4;
  l.lver = load8(p.data()) & 0x0F;
  l.sl = load8(p.data() + 1) >> 4;
  l.lnh = load8(p.data() + 1) & 3;
  l.dlid = load_be16(p.data() + 2);
  l.pkt_len = load_be16(p.data() + 4) & 0x7FF;
  l.slid = load_be16(p.data() + 6);
  if (l.lnh < 2) return WireErrc::kNotRoce;  // raw or IPv6: no BTH
  f.has_grh = l.lnh == 3;
  const size_t hdr = kLrhLen + (f.has_grh ? kGrhLen : 0);
  const size_t len = size_t{l.pkt_len} * 4;  // LRH .. ICRC
  if (len < hdr + kBthLen + kIcrcLen || p.size() < len + kVcrcLen) return WireErrc::kTruncated;
  if (f.has_grh) {
    const std::byte* g = p.data() + kLrhLen;
    const uint32_t w = load_be32(g);
    f.grh.tclass = static_cast<uint8_t>(w >> 20);
    f.grh.flow_label = w & 0xFFFFF;
    f.grh.next_hdr = load8(g + 6);
    f.grh.hop_limit = load8(g + 7);
    std::memcpy(f.grh.sgid.data(), g + 8, 16);
    std::memcpy(f.grh.dgid.data(), g + 24, 16);
  }
  auto roce = parse_roce(p.subspan(hdr, len - hdr));
  if (!roce) return roce.error();
  f.roce = *roce;
  f.vcrc = load_be16(p.data() + len);

  // Masked copy of LRH [+ GRH] + BTH (at most 60 bytes), then the rest as is.
  std::byte m[kLrhLen + kGrhLen + kBthLen];
  std::memcpy(m, p.data(), hdr + kBthLen);
  const std::byte ff{0xFF};
  if (f.has_grh) {
    std::memset(m, 0xFF, kLrhLen);  // routers rewrite the LRH of a global packet
    m[kLrhLen] |= std::byte{0x0F};  // traffic class, high nibble
    m[kLrhLen + 1] = m[kLrhLen + 2] = m[kLrhLen + 3] = ff;  // traffic class, flow label
    m[kLrhLen + 7] = ff;            // hop limit
  } else {
    m[0] |= std::byte{0xF0};        // VL
  }
  m[hdr + 4] = ff;                  // BTH FECN/BECN/reserved
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(m), static_cast<uInt>(hdr + kBthLen));
  const size_t rest = hdr + kBthLen;
  crc = crc32(crc, reinterpret_cast<const Bytef*>(p.data() + rest),
              static_cast<uInt>(len - kIcrcLen - rest));
  f.icrc_computed = static_cast<uint32_t>(crc);
  return f;
}

}  // namespace rocelab::wire
