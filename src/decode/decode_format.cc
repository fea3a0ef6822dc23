#include "decode/decode_format.h"

#include <cstdio>

#include "decode/decode_mad.h"
#include "decode/json_line.h"
#include "present/fields.h"
#include "present/headers.h"
#include "wire/gsi.h"

namespace rocelab::decode {

using present::aeth_kind;
using present::hex;
using present::nak_name;
using wire::Hdr;

namespace {

std::string seconds(std::chrono::nanoseconds t) {
  char buf[40];
  const long long ns = t.count();
  std::snprintf(buf, sizeof buf, "%s%lld.%06lld", ns < 0 ? "-" : "", (ns < 0 ? -ns : ns) / 1000000000,
                ((ns < 0 ? -ns : ns) % 1000000000) / 1000);
  return buf;
}

std::string addr(const wire::IpUdpInfo& ip, bool src) {
  return (src ? ip.src : ip.dst).to_string();
}

void add_ip_json(JsonLine& j, const wire::IpUdpInfo& ip) {
  j.str("src", ip.src.to_string()).str("dst", ip.dst.to_string());
  j.num("sport", ip.sport).num("dport", ip.dport);
}

void add_endpoints_json(JsonLine& j, const Endpoints& e) {
  if (e.ip != nullptr) {
    add_ip_json(j, *e.ip);
    return;
  }
  j.str("src", e.src).str("dst", e.dst);
  if (e.ib != nullptr) {
    const wire::Lrh& l = e.ib->lrh;
    j.str("link", "infiniband").num("slid", l.slid).num("dlid", l.dlid).num("sl", l.sl);
    j.num("vl", l.vl).num("lnh", l.lnh).num("vcrc", e.ib->vcrc);
  }
}

void add_frame_json(JsonLine& j, const FrameRef& f) {
  j.str("file", f.file).num("frame", f.frame);
  j.raw("time", seconds(f.rel)).num("ts_ns", static_cast<uint64_t>(f.ts.count()));
}

}  // namespace

Endpoints endpoints(const wire::DecodedFrame& d) {
  return {addr(d.ip.info, true), addr(d.ip.info, false), &d.ip.info, nullptr};
}

Endpoints endpoints(const wire::IbFrame& f) {
  if (f.has_grh) {
    return {wire::IpAddr::from_gid(f.grh.sgid).to_string(),
            wire::IpAddr::from_gid(f.grh.dgid).to_string(), nullptr, &f};
  }
  return {"LID " + std::to_string(f.lrh.slid), "LID " + std::to_string(f.lrh.dlid), nullptr, &f};
}

std::string packet_text(const FrameRef& f, const Endpoints& e, const wire::RocePacket& p,
                        uint32_t icrc_computed) {
  char head[64];
  std::snprintf(head, sizeof head, "%6llu %s ", static_cast<unsigned long long>(f.frame),
                seconds(f.rel).c_str());
  std::string s = head;
  s += e.src + " -> " + e.dst + " ";
  s += present::header_line(p.hdr);
  s += " len=" + std::to_string(p.payload.size());
  if (wire::is_to_gsi(p)) s += mad_text(p.payload);
  if (p.icrc == icrc_computed) {
    s += " ICRC ok";
  } else {
    s += " ICRC BAD (carried " + hex(p.icrc, 8) + ", computed " + hex(icrc_computed, 8) + ")";
  }
  if (e.ib != nullptr) s += " [native IB, SL " + std::to_string(e.ib->lrh.sl) + "]";
  return s;
}

std::string packet_json(const FrameRef& f, const Endpoints& e, const wire::RocePacket& p,
                        uint32_t icrc_computed) {
  const wire::RoceHeaders& h = p.hdr;
  const wire::OpInfo& info = h.info();
  JsonLine j;
  j.str("type", "packet");
  add_frame_json(j, f);
  add_endpoints_json(j, e);
  j.num("opcode", info.code).str("opname", info.name).str("transport", to_string(info.transport));
  j.num("dest_qp", h.bth.dest_qpn.value()).num("psn", h.bth.psn.value());
  j.boolean("ack_req", h.bth.ack_req).boolean("se", h.bth.se).boolean("mig_req", h.bth.mig_req);
  j.num("pad", h.bth.pad_count).num("pkey", h.bth.pkey);
  j.boolean("fecn", h.bth.fecn).boolean("becn", h.bth.becn);
  if (info.carries(Hdr::kDeth)) {
    j.raw("deth", JsonLine().num("qkey", h.deth.qkey).num("srcqp", h.deth.src_qpn.value()).done());
  }
  if (info.carries(Hdr::kXrcEth)) j.raw("xrceth", JsonLine().num("srqn", h.xrceth.srqn).done());
  if (info.carries(Hdr::kReth)) {
    j.raw("reth", JsonLine()
                      .num("va", h.reth.va)
                      .num("rkey", h.reth.rkey)
                      .num("dma_len", h.reth.dma_len)
                      .done());
  }
  if (info.carries(Hdr::kAtomicEth)) {
    j.raw("atomic_eth", JsonLine()
                            .num("va", h.atomic_eth.va)
                            .num("rkey", h.atomic_eth.rkey)
                            .num("swap_add", h.atomic_eth.swap_add)
                            .num("compare", h.atomic_eth.compare)
                            .done());
  }
  if (info.carries(Hdr::kAeth)) {
    JsonLine a;
    a.num("syndrome", h.aeth.syndrome).str("kind", aeth_kind(h.aeth));
    switch (h.aeth.kind()) {
      case wire::AckKind::kAck: a.num("credits", h.aeth.value5()); break;
      case wire::AckKind::kRnrNak:
        a.num("timer", h.aeth.value5()).num("timer_us", wire::rnr_timer_us(h.aeth.value5()));
        break;
      case wire::AckKind::kNak:
        a.num("code", h.aeth.value5()).str("reason", nak_name(h.aeth.value5()));
        break;
      case wire::AckKind::kReserved: break;
    }
    j.raw("aeth", a.num("msn", h.aeth.msn).done());
  }
  if (info.carries(Hdr::kAtomicAckEth)) {
    j.raw("atomic_ack_eth", JsonLine().num("orig", h.atomic_ack_eth.orig).done());
  }
  if (info.carries(Hdr::kImmDt)) j.num("immdt", h.immdt.imm);
  if (info.carries(Hdr::kIeth)) j.raw("ieth", JsonLine().num("rkey", h.ieth.rkey).done());
  j.num("payload_len", p.payload.size());
  if (wire::is_to_gsi(p)) j.raw("mad", mad_json(p.payload));
  j.num("icrc", p.icrc).num("icrc_computed", icrc_computed).boolean("icrc_ok", p.icrc == icrc_computed);
  return j.done();
}

std::string malformed_text(const FrameRef& f, const Malformed& m) {
  char head[64];
  std::snprintf(head, sizeof head, "%6llu %s ", static_cast<unsigned long long>(f.frame),
                seconds(f.rel).c_str());
  std::string s = head;
  if (m.ip) s += addr(*m.ip, true) + " -> " + addr(*m.ip, false) + " ";
  s += "MALFORMED: " + m.error.message();
  if (m.opcode) s += " (opcode " + hex(*m.opcode, 2) + ")";
  if (m.caplen < m.orig_len) {
    s += " [capture kept " + std::to_string(m.caplen) + " of " + std::to_string(m.orig_len) +
         " bytes]";
  }
  return s;
}

std::string malformed_json(const FrameRef& f, const Malformed& m) {
  JsonLine j;
  j.str("type", "malformed");
  add_frame_json(j, f);
  if (m.ip) add_ip_json(j, *m.ip);
  j.str("error", m.error.message());
  if (m.opcode) j.num("opcode", *m.opcode);
  j.num("caplen", m.caplen).num("orig_len", m.orig_len);
  return j.done();
}

}  // namespace rocelab::decode
