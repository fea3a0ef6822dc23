#include "wire/gsi.h"

#include <array>

namespace rocelab::wire {

RoceHeaders gsi_headers(Psn psn) {
  RoceHeaders h;
  h.bth.opcode = op::kUdSendOnly;
  h.bth.pkey = kDefaultPkey;
  h.bth.dest_qpn = kGsiQpn;
  h.bth.ack_req = true;
  h.bth.psn = psn;
  h.deth = {kGsiQkey, kGsiQpn};
  return h;
}

Result<size_t> build_cm_frame(std::span<std::byte> out, const IpUdpInfo& ip, Psn psn,
                              const CmMad& mad, bool with_ethernet) {
  std::array<std::byte, kMadLen> buf;  // on the stack: nothing allocated per MAD
  auto len = encode_cm_mad(buf, mad);
  if (!len) return len.error();
  return build_frame(out, ip, gsi_headers(psn), buf, with_ethernet);
}

bool is_to_gsi(const RocePacket& p) {
  return p.hdr.bth.opcode == op::kUdSendOnly && p.hdr.bth.dest_qpn == kGsiQpn;
}

bool is_gsi_mad(const RocePacket& p) { return is_to_gsi(p) && p.payload.size() == kMadLen; }

}  // namespace rocelab::wire
