#include "wire/packet.h"

#include <cstring>

namespace rocelab::wire {

Result<RocePacket> parse_roce(std::span<const std::byte> b) {
  if (b.size() < kBthLen + kIcrcLen) return WireErrc::kTruncated;
  if (b.size() > kMaxRoceLen) return WireErrc::kOversized;
  BthView bth(b.data());
  if (bth.tver() != 0) return WireErrc::kBadTVer;  // IBTA C9-4: TVer must be 0
  const OpInfo& info = op_info(bth.opcode());
  if (!info.valid) return WireErrc::kUnknownOpcode;
  const size_t hlen = info.header_bytes();
  if (b.size() < hlen + kIcrcLen) return WireErrc::kTruncated;

  RocePacket p;
  RoceHeaders& h = p.hdr;
  h.bth = BthFields{bth.opcode(), bth.se(),   bth.mig_req(),  bth.pad_count(), bth.tver(),
                    bth.pkey(),   bth.fecn(), bth.becn(),     bth.dest_qpn(),  bth.ack_req(),
                    bth.psn()};
  const std::byte* base = b.data();
  auto at = [&](Hdr x) { return base + info.offset_of(x); };
  if (info.carries(Hdr::kDeth)) h.deth = Deth::load(at(Hdr::kDeth));
  if (info.carries(Hdr::kXrcEth)) h.xrceth = XrcEth::load(at(Hdr::kXrcEth));
  if (info.carries(Hdr::kReth)) h.reth = Reth::load(at(Hdr::kReth));
  if (info.carries(Hdr::kAtomicEth)) h.atomic_eth = AtomicEth::load(at(Hdr::kAtomicEth));
  if (info.carries(Hdr::kAeth)) h.aeth = Aeth::load(at(Hdr::kAeth));
  if (info.carries(Hdr::kAtomicAckEth))
    h.atomic_ack_eth = AtomicAckEth::load(at(Hdr::kAtomicAckEth));
  if (info.carries(Hdr::kImmDt)) h.immdt = ImmDt::load(at(Hdr::kImmDt));
  if (info.carries(Hdr::kIeth)) h.ieth = Ieth::load(at(Hdr::kIeth));

  const size_t body = b.size() - hlen - kIcrcLen;  // payload + pad
  if (h.bth.pad_count > body) return WireErrc::kBadPadCount;
  const size_t payload_len = body - h.bth.pad_count;
  if (payload_len > kMaxMtu) return WireErrc::kOversized;
  // IBTA 9.2-9.4: ACKs, READ requests, atomics and the CNP end with their
  // headers; bytes after them would be silently ignored otherwise.
  if (body != 0 && !info.is(OpClass::kPayload)) return WireErrc::kUnexpectedPayload;
  p.payload = b.subspan(hlen, payload_len);
  p.icrc = load_le32(base + b.size() - kIcrcLen);
  return p;
}

Result<size_t> encode_headers(std::span<std::byte> out, const RoceHeaders& h) {
  const OpInfo& info = h.info();
  if (!info.valid) return WireErrc::kUnknownOpcode;
  const size_t hlen = info.header_bytes();
  if (out.size() < hlen) return WireErrc::kBufferTooSmall;
  std::byte* base = out.data();
  BthWriter bth(base);
  bth.set_opcode(h.bth.opcode);
  bth.set_flags(h.bth.se, h.bth.mig_req, h.bth.pad_count, h.bth.tver);
  bth.set_pkey(h.bth.pkey);
  bth.set_ecn(h.bth.fecn, h.bth.becn);
  bth.set_dest_qpn(h.bth.dest_qpn);
  bth.set_ack_req_psn(h.bth.ack_req, h.bth.psn);
  auto at = [&](Hdr x) { return base + info.offset_of(x); };
  if (info.carries(Hdr::kDeth)) h.deth.store(at(Hdr::kDeth));
  if (info.carries(Hdr::kXrcEth)) h.xrceth.store(at(Hdr::kXrcEth));
  if (info.carries(Hdr::kReth)) h.reth.store(at(Hdr::kReth));
  if (info.carries(Hdr::kAtomicEth)) h.atomic_eth.store(at(Hdr::kAtomicEth));
  if (info.carries(Hdr::kAeth)) h.aeth.store(at(Hdr::kAeth));
  if (info.carries(Hdr::kAtomicAckEth)) h.atomic_ack_eth.store(at(Hdr::kAtomicAckEth));
  if (info.carries(Hdr::kImmDt)) h.immdt.store(at(Hdr::kImmDt));
  if (info.carries(Hdr::kIeth)) h.ieth.store(at(Hdr::kIeth));
  if (info.carries(Hdr::kCnpPad)) std::memset(at(Hdr::kCnpPad), 0, kCnpPadLen);
  return hlen;
}

Result<size_t> encode_roce(std::span<std::byte> out, RoceHeaders h,
                           std::span<const std::byte> payload) {
  if (payload.size() > kMaxMtu) return WireErrc::kPayloadTooLarge;
  if (!payload.empty() && h.info().valid && !h.info().is(OpClass::kPayload))
    return WireErrc::kUnexpectedPayload;
  h.bth.pad_count = pad_for(payload.size());
  auto hlen = encode_headers(out, h);
  if (!hlen) return hlen.error();
  const size_t total = *hlen + payload.size() + h.bth.pad_count + kIcrcLen;
  if (out.size() < total) return WireErrc::kBufferTooSmall;
  if (!payload.empty()) std::memcpy(out.data() + *hlen, payload.data(), payload.size());
  std::memset(out.data() + *hlen + payload.size(), 0, h.bth.pad_count + kIcrcLen);
  return total;
}

}  // namespace rocelab::wire
