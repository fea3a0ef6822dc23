#include "decode/decode_format.h"

#include <cstdio>

#include "present/fields.h"
#include "present/headers.h"
#include "present/json.h"
#include "present/mad.h"
#include "wire/gsi.h"

namespace rocelab::decode {

using present::hex;
using present::Json;
using present::json_line;
using present::mad_text;

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

void add_ip_json(Json& j, const wire::IpUdpInfo& ip) {
  j["src"] = ip.src.to_string();
  j["dst"] = ip.dst.to_string();
  j["sport"] = ip.sport;
  j["dport"] = ip.dport;
}

void add_endpoints_json(Json& j, const Endpoints& e) {
  if (e.ip != nullptr) {
    add_ip_json(j, *e.ip);
    return;
  }
  j["src"] = e.src;
  j["dst"] = e.dst;
  if (e.ib != nullptr) {
    const wire::Lrh& l = e.ib->lrh;
    j["link"] = "infiniband";
    j["slid"] = l.slid;
    j["dlid"] = l.dlid;
    j["sl"] = l.sl;
    j["vl"] = l.vl;
    j["lnh"] = l.lnh;
    j["vcrc"] = e.ib->vcrc;
  }
}

// "type" first, then where the packet sits: file, frame, seconds since the
// file's first frame (microseconds, as the text line), capture time in ns.
Json frame_json(std::string_view type, const FrameRef& f) {
  Json j = {{"type", type}, {"file", f.file}, {"frame", f.frame}};
  j["time"] = static_cast<double>(f.rel.count() / 1000) / 1e6;
  j["ts_ns"] = f.ts.count();
  return j;
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
  Json j = frame_json("packet", f);
  add_endpoints_json(j, e);
  present::add_headers_json(j, p.hdr);
  j["payload_len"] = p.payload.size();
  if (wire::is_to_gsi(p)) j["mad"] = present::mad_json(p.payload);
  j["icrc"] = p.icrc;
  j["icrc_computed"] = icrc_computed;
  j["icrc_ok"] = p.icrc == icrc_computed;
  return json_line(j);
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
  Json j = frame_json("malformed", f);
  if (m.ip) add_ip_json(j, *m.ip);
  j["error"] = m.error.message();
  if (m.opcode) j["opcode"] = *m.opcode;
  j["caplen"] = m.caplen;
  j["orig_len"] = m.orig_len;
  return json_line(j);
}

}  // namespace rocelab::decode
