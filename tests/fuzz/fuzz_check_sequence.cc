// Fuzz target, structure-aware: `rocelab check`'s Analyzer fed sequences of
// plausible RC/UC packets between two hosts. Each 8 input bytes make one
// packet: who sends it, its opcode (from the RC/UC opcodes that exist), a PSN
// near the last one, AckReq, a payload length around the MTU, an AETH
// syndrome, a RETH length, the time step. Real protocol exchanges, broken
// ones, and everything in between reach the analysis' state machines
// (retransmission causes, READ responses, NAK checks). No crash, no hang; the
// state stays bounded.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "trace/check.h"
#include "wire/opcode_table.h"
#include "wire/packet.h"

using namespace rocelab;
using namespace rocelab::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<uint8_t> kOps = [] {
    std::vector<uint8_t> v;
    for (int op = 0; op < 0x40; ++op)
      if (op_info(static_cast<uint8_t>(op)).valid) v.push_back(static_cast<uint8_t>(op));
    v.push_back(op::kCnp);
    return v;
  }();
  static const std::byte payload[4200] = {};
  trace::Analyzer an;
  uint32_t psn[2] = {100, 5000};
  std::chrono::nanoseconds t{0};
  for (size_t i = 0; i + 8 <= size && i < 8 * 512; i += 8) {
    const uint8_t* b = data + i;
    const bool from_a = (b[0] & 1) != 0;
    RocePacket p;
    RoceHeaders& h = p.hdr;
    h.bth.opcode = kOps[b[1] % kOps.size()];
    const int side = from_a ? 0 : 1;
    psn[side] = (psn[side] + static_cast<uint32_t>(static_cast<int8_t>(b[2]))) & kMask24;
    h.bth.psn = Psn(b[0] & 2 ? psn[1 - side] : psn[side]);  // responses use the other side's PSNs
    h.bth.ack_req = (b[0] & 4) != 0;
    h.bth.dest_qpn = Qpn(from_a ? 0x12 : 0x11 + (b[0] >> 6));
    h.bth.pad_count = b[0] & 0x30 ? (b[3] & 3) : 0;
    h.bth.pkey = b[0] & 0x08 ? 0x7FFF : 0xFFFF;
    h.aeth.syndrome = b[4];
    h.aeth.msn = b[5];
    h.reth.dma_len = static_cast<uint32_t>(b[6]) * 64;
    h.deth.qkey = b[7] & 0x80 ? 0x11111111 : 0x22222222;
    const size_t len = (static_cast<size_t>(b[3]) * 17) % 4200;
    p.payload = std::span<const std::byte>(payload, len);
    t += std::chrono::nanoseconds(static_cast<int64_t>(b[7] & 0x7F) * 997);
    trace::TracePacket tp;
    tp.number = i / 8 + 1;
    tp.time = t;
    tp.src = from_a ? "10.0.0.1" : "10.0.0.2";
    tp.dst = from_a ? "10.0.0.2" : "10.0.0.1";
    tp.tclass = b[6] & 3;
    tp.packet = &p;
    tp.icrc_ok = (b[5] & 0x80) == 0;
    an.add(tp);
  }
  an.finish();
  (void)an.spaces();
  return 0;
}
