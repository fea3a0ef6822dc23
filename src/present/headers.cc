#include "present/headers.h"

#include <cstdio>

#include "present/fields.h"

namespace rocelab::present {

using wire::Hdr;

std::string header_line(const wire::RoceHeaders& h) {
  const wire::OpInfo& info = h.info();
  std::string s(info.name);
  s += " QP=" + qpn_text(h.bth.dest_qpn.value()) + " PSN=" + std::to_string(h.bth.psn.value());
  if (h.bth.ack_req) s += " A";
  if (h.bth.se) s += " SE";
  if (h.bth.mig_req) s += " M";
  if (h.bth.fecn) s += " FECN";
  if (h.bth.becn) s += " BECN";
  if (h.bth.pkey != wire::kDefaultPkey) s += " P_Key=" + hex(h.bth.pkey, 4);
  if (info.carries(Hdr::kDeth))
    s += " DETH[qkey=" + hex(h.deth.qkey, 8) + " srcqp=" + hex(h.deth.src_qpn.value(), 6) + "]";
  if (info.carries(Hdr::kXrcEth)) s += " XRCETH[srqn=" + hex(h.xrceth.srqn, 6) + "]";
  if (info.carries(Hdr::kReth)) {
    s += " RETH[va=" + hex(h.reth.va, 16) + " rkey=" + hex(h.reth.rkey, 8) +
         " len=" + std::to_string(h.reth.dma_len) + "]";
  }
  if (info.carries(Hdr::kAtomicEth)) {
    const auto& a = h.atomic_eth;
    s += " AtomicETH[va=" + hex(a.va, 16) + " rkey=" + hex(a.rkey, 8);
    if (wire::rc_relative(info.code) == wire::op::kRcCmpSwap) {
      s += " swap=" + hex(a.swap_add) + " cmp=" + hex(a.compare) + "]";
    } else {
      s += " add=" + hex(a.swap_add) + "]";
    }
  }
  if (info.carries(Hdr::kAeth))
    s += " AETH[" + aeth_text(h.aeth) + " MSN=" + std::to_string(h.aeth.msn) + "]";
  if (info.carries(Hdr::kAtomicAckEth))
    s += " AtomicAckETH[orig=" + hex(h.atomic_ack_eth.orig) + "]";
  if (info.carries(Hdr::kImmDt)) s += " ImmDt=" + hex(h.immdt.imm, 8);
  if (info.carries(Hdr::kIeth)) s += " IETH[rkey=" + hex(h.ieth.rkey, 8) + "]";
  return s;
}

std::string header_lines(const wire::RocePacket& p) {
  const wire::RoceHeaders& h = p.hdr;
  const wire::OpInfo& info = h.info();
  char b[256];
  std::snprintf(b, sizeof b,
                "BTH    opcode 0x%02x (%s) se %d m %d pad %u tver %u pkey 0x%04x fecn %d becn %d "
                "dest_qp 0x%06x a %d psn %u\n",
                h.bth.opcode, info.valid ? std::string(info.name).c_str() : "?", h.bth.se, h.bth.mig_req,
                h.bth.pad_count, h.bth.tver, h.bth.pkey, h.bth.fecn, h.bth.becn, h.bth.dest_qpn.value(),
                h.bth.ack_req, h.bth.psn.value());
  std::string s = b;
  if (info.carries(wire::Hdr::kXrcEth)) {
    std::snprintf(b, sizeof b, "XRCETH srq 0x%06x\n", h.xrceth.srqn);
    s += b;
  }
  if (info.carries(wire::Hdr::kDeth)) {
    std::snprintf(b, sizeof b, "DETH   qkey 0x%08x src_qp 0x%06x\n", h.deth.qkey, h.deth.src_qpn.value());
    s += b;
  }
  if (info.carries(wire::Hdr::kReth)) {
    std::snprintf(b, sizeof b, "RETH   va 0x%016llx rkey 0x%08x len %u\n",
                  static_cast<unsigned long long>(h.reth.va), h.reth.rkey, h.reth.dma_len);
    s += b;
  }
  if (info.carries(wire::Hdr::kAtomicEth)) {
    std::snprintf(b, sizeof b, "AtomicETH va 0x%016llx rkey 0x%08x swap/add %llu compare %llu\n",
                  static_cast<unsigned long long>(h.atomic_eth.va), h.atomic_eth.rkey,
                  static_cast<unsigned long long>(h.atomic_eth.swap_add),
                  static_cast<unsigned long long>(h.atomic_eth.compare));
    s += b;
  }
  if (info.carries(wire::Hdr::kAeth)) {
    std::snprintf(b, sizeof b, "AETH   syndrome 0x%02x (%s) msn %u\n", h.aeth.syndrome,
                  aeth_brief(h.aeth).c_str(), h.aeth.msn);
    s += b;
  }
  if (info.carries(wire::Hdr::kAtomicAckEth)) {
    std::snprintf(b, sizeof b, "AtomicAckETH orig %llu\n", static_cast<unsigned long long>(h.atomic_ack_eth.orig));
    s += b;
  }
  if (info.carries(wire::Hdr::kImmDt)) {
    std::snprintf(b, sizeof b, "ImmDt  0x%08x\n", h.immdt.imm);
    s += b;
  }
  if (info.carries(wire::Hdr::kIeth)) {
    std::snprintf(b, sizeof b, "IETH   rkey 0x%08x\n", h.ieth.rkey);
    s += b;
  }
  std::snprintf(b, sizeof b, "payload %zu bytes, ICRC 0x%08x\n", p.payload.size(), p.icrc);
  return s + b;
}

void add_headers_json(Json& j, const wire::RoceHeaders& h) {
  const wire::OpInfo& info = h.info();
  j["opcode"] = info.code;
  j["opname"] = info.name;
  j["transport"] = to_string(info.transport);
  j["dest_qp"] = h.bth.dest_qpn.value();
  j["psn"] = h.bth.psn.value();
  j["ack_req"] = h.bth.ack_req;
  j["se"] = h.bth.se;
  j["mig_req"] = h.bth.mig_req;
  j["pad"] = h.bth.pad_count;
  j["pkey"] = h.bth.pkey;
  j["fecn"] = h.bth.fecn;
  j["becn"] = h.bth.becn;
  if (info.carries(Hdr::kDeth)) j["deth"] = {{"qkey", h.deth.qkey}, {"srcqp", h.deth.src_qpn.value()}};
  if (info.carries(Hdr::kXrcEth)) j["xrceth"] = {{"srqn", h.xrceth.srqn}};
  if (info.carries(Hdr::kReth)) j["reth"] = {{"va", h.reth.va}, {"rkey", h.reth.rkey}, {"dma_len", h.reth.dma_len}};
  if (info.carries(Hdr::kAtomicEth)) {
    j["atomic_eth"] = {{"va", h.atomic_eth.va},
                       {"rkey", h.atomic_eth.rkey},
                       {"swap_add", h.atomic_eth.swap_add},
                       {"compare", h.atomic_eth.compare}};
  }
  if (info.carries(Hdr::kAeth)) {
    Json a = {{"syndrome", h.aeth.syndrome}, {"kind", aeth_kind(h.aeth)}};
    switch (h.aeth.kind()) {
      case wire::AckKind::kAck: a["credits"] = h.aeth.value5(); break;
      case wire::AckKind::kRnrNak:
        a["timer"] = h.aeth.value5();
        a["timer_us"] = wire::rnr_timer_us(h.aeth.value5());
        break;
      case wire::AckKind::kNak:
        a["code"] = h.aeth.value5();
        a["reason"] = nak_name(h.aeth.value5());
        break;
      case wire::AckKind::kReserved: break;
    }
    a["msn"] = h.aeth.msn;
    j["aeth"] = std::move(a);
  }
  if (info.carries(Hdr::kAtomicAckEth)) j["atomic_ack_eth"] = {{"orig", h.atomic_ack_eth.orig}};
  if (info.carries(Hdr::kImmDt)) j["immdt"] = h.immdt.imm;
  if (info.carries(Hdr::kIeth)) j["ieth"] = {{"rkey", h.ieth.rkey}};
}

}  // namespace rocelab::present
