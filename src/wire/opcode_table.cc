#include "wire/opcode_table.h"

namespace rocelab::wire {
namespace {

using enum Hdr;
using C = OpClass;

struct RcRow {
  uint8_t code;
  std::string_view name;
  Hdr hdrs;
  OpClass cls;
};

// RC opcodes 0x00-0x17 (IBTA Table 38). UC, UD and XRC derive from this list.
constexpr RcRow kRcRows[] = {
    {0x00, "SEND First", kNone, C::kRequest | C::kSend | C::kFirst | C::kPayload},
    {0x01, "SEND Middle", kNone, C::kRequest | C::kSend | C::kMiddle | C::kPayload},
    {0x02, "SEND Last", kNone, C::kRequest | C::kSend | C::kLast | C::kPayload},
    {0x03, "SEND Last with Immediate", kImmDt,
     C::kRequest | C::kSend | C::kLast | C::kImm | C::kPayload},
    {0x04, "SEND Only", kNone, C::kRequest | C::kSend | C::kOnly | C::kPayload},
    {0x05, "SEND Only with Immediate", kImmDt,
     C::kRequest | C::kSend | C::kOnly | C::kImm | C::kPayload},
    {0x06, "RDMA WRITE First", kReth, C::kRequest | C::kWrite | C::kFirst | C::kPayload},
    {0x07, "RDMA WRITE Middle", kNone, C::kRequest | C::kWrite | C::kMiddle | C::kPayload},
    {0x08, "RDMA WRITE Last", kNone, C::kRequest | C::kWrite | C::kLast | C::kPayload},
    {0x09, "RDMA WRITE Last with Immediate", kImmDt,
     C::kRequest | C::kWrite | C::kLast | C::kImm | C::kPayload},
    {0x0A, "RDMA WRITE Only", kReth, C::kRequest | C::kWrite | C::kOnly | C::kPayload},
    {0x0B, "RDMA WRITE Only with Immediate", kReth | kImmDt,
     C::kRequest | C::kWrite | C::kOnly | C::kImm | C::kPayload},
    {0x0C, "RDMA READ Request", kReth, C::kRequest | C::kRead | C::kOnly},
    {0x0D, "RDMA READ response First", kAeth, C::kResponse | C::kRead | C::kFirst | C::kPayload},
    {0x0E, "RDMA READ response Middle", kNone,
     C::kResponse | C::kRead | C::kMiddle | C::kPayload},
    {0x0F, "RDMA READ response Last", kAeth, C::kResponse | C::kRead | C::kLast | C::kPayload},
    {0x10, "RDMA READ response Only", kAeth, C::kResponse | C::kRead | C::kOnly | C::kPayload},
    {0x11, "Acknowledge", kAeth, C::kResponse | C::kAck | C::kOnly},
    {0x12, "ATOMIC Acknowledge", kAeth | kAtomicAckEth, C::kResponse | C::kAtomic | C::kOnly},
    {0x13, "CmpSwap", kAtomicEth, C::kRequest | C::kAtomic | C::kOnly},
    {0x14, "FetchAdd", kAtomicEth, C::kRequest | C::kAtomic | C::kOnly},
    {0x16, "SEND Last with Invalidate", kIeth,
     C::kRequest | C::kSend | C::kLast | C::kInv | C::kPayload},
    {0x17, "SEND Only with Invalidate", kIeth,
     C::kRequest | C::kSend | C::kOnly | C::kInv | C::kPayload},
};

// Names are stored once, with their transport prefix, in this static pool.
struct NamePool {
  char buf[256][48] = {};
};

constexpr std::string_view prefix(Transport t) {
  switch (t) {
    case Transport::kRC: return "RC ";
    case Transport::kUC: return "UC ";
    case Transport::kUD: return "UD ";
    case Transport::kXRC: return "XRC ";
    case Transport::kCNP: return "";
  }
  return "";
}

struct Built {
  std::array<OpInfo, 256> table{};
  NamePool names;
};

void add(Built& b, uint8_t code, Transport t, std::string_view base, Hdr hdrs, OpClass cls) {
  char* out = b.names.buf[code];
  size_t n = 0;
  for (char c : prefix(t)) out[n++] = c;
  for (char c : base) out[n++] = c;
  out[n] = '\0';
  b.table[code] = OpInfo{true, code, std::string_view(out, n), t, hdrs, cls};
}

Built build() {
  Built b;
  for (const RcRow& r : kRcRows) {
    add(b, r.code, Transport::kRC, r.name, r.hdrs, r.cls);
    // UC: SEND and RDMA WRITE only (IBTA 9.8.2).
    if (r.code <= 0x0B) add(b, op::kUcBase + r.code, Transport::kUC, r.name, r.hdrs, r.cls);
    // XRC: same as RC; requests carry an XRCETH (IBTA 14.2 / XRC annex).
    Hdr xh = has(r.cls, C::kRequest) ? (r.hdrs | kXrcEth) : r.hdrs;
    add(b, op::kXrcBase + r.code, Transport::kXRC, r.name, xh, r.cls);
  }
  add(b, op::kUdSendOnly, Transport::kUD, "SEND Only", kDeth,
      C::kRequest | C::kSend | C::kOnly | C::kPayload);
  add(b, op::kUdSendOnlyImm, Transport::kUD, "SEND Only with Immediate", kDeth | kImmDt,
      C::kRequest | C::kSend | C::kOnly | C::kImm | C::kPayload);
  add(b, op::kCnp, Transport::kCNP, "CNP", kCnpPad, C::kCnp);
  return b;
}

const Built& built() {
  static const Built b = build();
  return b;
}

}  // namespace

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::kRC: return "RC";
    case Transport::kUC: return "UC";
    case Transport::kUD: return "UD";
    case Transport::kXRC: return "XRC";
    case Transport::kCNP: return "CNP";
  }
  return "?";
}

const std::array<OpInfo, 256>& opcode_table() { return built().table; }

std::optional<uint8_t> for_transport(Transport t, uint8_t rc_op) {
  uint8_t code = 0;
  switch (t) {
    case Transport::kRC: code = rc_op; break;
    case Transport::kUC: code = static_cast<uint8_t>(op::kUcBase + rc_op); break;
    case Transport::kXRC: code = static_cast<uint8_t>(op::kXrcBase + rc_op); break;
    case Transport::kUD:
      if (rc_op == op::kRcSendOnly) return op::kUdSendOnly;
      if (rc_op == op::kRcSendOnlyImm) return op::kUdSendOnlyImm;
      return std::nullopt;
    case Transport::kCNP: return std::nullopt;
  }
  if (rc_op > 0x17 || !op_info(code).valid || op_info(code).transport != t) return std::nullopt;
  return code;
}

}  // namespace rocelab::wire
