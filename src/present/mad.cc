#include "present/mad.h"

#include <variant>

#include "present/fields.h"
#include "wire/cm_mad.h"
#include "wire/cma_hdr.h"

namespace rocelab::present {

namespace {

using namespace wire;

std::string_view msg_ref_name(CmMsgRef r) {
  switch (r) {
    case CmMsgRef::kReq: return "REQ";
    case CmMsgRef::kRep: return "REP";
    case CmMsgRef::kLap: return "LAP";
    case CmMsgRef::kOther: return "other";
  }
  return "other";
}

// 4.096 us * 2^n, as the CM's timeouts are coded (IBTA 12.6.5).
std::string timeout_text(uint8_t n) {
  const uint64_t us = (4096ull << n) / 1000;
  return std::to_string(n) + " (" + (us >= 10000 ? std::to_string(us / 1000) + " ms" : std::to_string(us) + " us") + ")";
}

uint32_t mtu_bytes(uint8_t code) { return code >= 1 && code <= 5 ? 128u << code : 0; }

std::string service_text(uint64_t sid) {
  std::string s = hex(sid, 16);
  if (auto svc = parse_rdma_cm_service_id(sid)) {
    s += "(" + std::string(rdma_ps_name(svc->port_space)) + " port " + std::to_string(svc->port) + ")";
  }
  return s;
}

// rdma_cm's header at the start of REQ / SIDR_REQ private data, for an rdma_cm IP service ID.
template <size_t N>
std::optional<CmaHdr> cma_of(uint64_t sid, const std::array<uint8_t, N>& pd) {
  auto svc = parse_rdma_cm_service_id(sid);
  if (!svc || svc->port_space == rdma_ps::kIb) return std::nullopt;
  auto h = parse_cma_hdr(std::as_bytes(std::span(pd)));
  if (!h) return std::nullopt;
  return *h;
}

std::string cma_text(const CmaHdr& h) {
  const std::string src = h.src.v6 ? "[" + h.src.to_string() + "]" : h.src.to_string();
  return " rdma_cm[" + src + ":" + std::to_string(h.port) + " -> " + h.dst.to_string() + "]";
}

struct Text {
  std::string operator()(const CmReq& m) const {
    std::string s = " comm=" + hex(m.local_comm_id, 8) + " service=" + service_text(m.service_id);
    s += " qpn=" + hex(m.local_qpn.value(), 6) + " psn=" + std::to_string(m.starting_psn.value());
    s += " mtu=" + std::to_string(mtu_bytes(m.path_mtu));
    s += " rd_atom=" + std::to_string(m.responder_resources) + "/" + std::to_string(m.initiator_depth);
    s += " retry=" + std::to_string(m.retry_count) + " rnr_retry=" + std::to_string(m.rnr_retry_count);
    s += " cm_timeout=" + timeout_text(m.remote_cm_response_timeout);
    s += " max_cm_retries=" + std::to_string(m.max_cm_retries);
    if (m.transport != CmTransport::kRc) s += " transport=" + std::to_string(static_cast<int>(m.transport));
    if (m.srq) s += " SRQ";
    s += " gid " + IpAddr::from_gid(m.primary.local_gid).to_string() + " -> " +
         IpAddr::from_gid(m.primary.remote_gid).to_string();
    if (auto h = cma_of(m.service_id, m.private_data)) s += cma_text(*h);
    return s;
  }
  std::string operator()(const CmMra& m) const {
    return ids(m.local_comm_id, m.remote_comm_id) + " mraed=" + std::string(msg_ref_name(m.message_mraed)) +
           " service_timeout=" + timeout_text(m.service_timeout);
  }
  std::string operator()(const CmRej& m) const {
    return ids(m.local_comm_id, m.remote_comm_id) + " rejected=" +
           std::string(msg_ref_name(m.message_rejected)) + " reason=" + std::to_string(m.reason) +
           " (" + std::string(rej_reason_name(m.reason)) + ")";
  }
  std::string operator()(const CmRep& m) const {
    std::string s = ids(m.local_comm_id, m.remote_comm_id);
    s += " qpn=" + hex(m.local_qpn.value(), 6) + " psn=" + std::to_string(m.starting_psn.value());
    s += " rd_atom=" + std::to_string(m.responder_resources) + "/" + std::to_string(m.initiator_depth);
    s += " rnr_retry=" + std::to_string(m.rnr_retry_count);
    if (m.srq) s += " SRQ";
    return s;
  }
  std::string operator()(const CmRtu& m) const { return ids(m.local_comm_id, m.remote_comm_id); }
  std::string operator()(const CmDreq& m) const {
    return ids(m.local_comm_id, m.remote_comm_id) + " remote_qpn=" + hex(m.remote_qpn.value(), 6);
  }
  std::string operator()(const CmDrep& m) const { return ids(m.local_comm_id, m.remote_comm_id); }
  std::string operator()(const CmSidrReq& m) const {
    std::string s = " request=" + hex(m.request_id, 8) + " service=" + service_text(m.service_id);
    if (m.pkey != 0xFFFF) s += " P_Key=" + hex(m.pkey, 4);
    if (auto h = cma_of(m.service_id, m.private_data)) s += cma_text(*h);
    return s;
  }
  std::string operator()(const CmSidrRep& m) const {
    return " request=" + hex(m.request_id, 8) + " status=" + std::to_string(m.status) +
           " qpn=" + hex(m.qpn.value(), 6) + " qkey=" + hex(m.qkey, 8) +
           " service=" + service_text(m.service_id);
  }
  static std::string ids(uint32_t local, uint32_t remote) {
    return " comm=" + hex(local, 8) + " remote_comm=" + hex(remote, 8);
  }
};

struct ToJson {
  Json& j;
  void operator()(const CmReq& m) const {
    j["local_comm_id"] = m.local_comm_id;
    j["service_id"] = m.service_id;
    j["local_qpn"] = m.local_qpn.value();
    j["starting_psn"] = m.starting_psn.value();
    j["path_mtu"] = mtu_bytes(m.path_mtu);
    j["responder_resources"] = m.responder_resources;
    j["initiator_depth"] = m.initiator_depth;
    j["retry_count"] = m.retry_count;
    j["rnr_retry_count"] = m.rnr_retry_count;
    j["remote_cm_response_timeout"] = m.remote_cm_response_timeout;
    j["local_cm_response_timeout"] = m.local_cm_response_timeout;
    j["max_cm_retries"] = m.max_cm_retries;
    j["transport"] = static_cast<uint8_t>(m.transport);
    j["srq"] = m.srq;
    j["local_ca_guid"] = m.local_ca_guid;
    j["local_gid"] = IpAddr::from_gid(m.primary.local_gid).to_string();
    j["remote_gid"] = IpAddr::from_gid(m.primary.remote_gid).to_string();
    cma(m.service_id, m.private_data);
  }
  void operator()(const CmMra& m) const {
    ids(m.local_comm_id, m.remote_comm_id);
    j["mraed"] = msg_ref_name(m.message_mraed);
    j["service_timeout"] = m.service_timeout;
  }
  void operator()(const CmRej& m) const {
    ids(m.local_comm_id, m.remote_comm_id);
    j["rejected"] = msg_ref_name(m.message_rejected);
    j["reason"] = m.reason;
    j["reason_name"] = rej_reason_name(m.reason);
  }
  void operator()(const CmRep& m) const {
    ids(m.local_comm_id, m.remote_comm_id);
    j["local_qpn"] = m.local_qpn.value();
    j["starting_psn"] = m.starting_psn.value();
    j["responder_resources"] = m.responder_resources;
    j["initiator_depth"] = m.initiator_depth;
    j["rnr_retry_count"] = m.rnr_retry_count;
    j["srq"] = m.srq;
    j["local_ca_guid"] = m.local_ca_guid;
  }
  void operator()(const CmRtu& m) const { ids(m.local_comm_id, m.remote_comm_id); }
  void operator()(const CmDreq& m) const {
    ids(m.local_comm_id, m.remote_comm_id);
    j["remote_qpn"] = m.remote_qpn.value();
  }
  void operator()(const CmDrep& m) const { ids(m.local_comm_id, m.remote_comm_id); }
  void operator()(const CmSidrReq& m) const {
    j["request_id"] = m.request_id;
    j["service_id"] = m.service_id;
    j["pkey"] = m.pkey;
    cma(m.service_id, m.private_data);
  }
  void operator()(const CmSidrRep& m) const {
    j["request_id"] = m.request_id;
    j["status"] = m.status;
    j["qpn"] = m.qpn.value();
    j["qkey"] = m.qkey;
    j["service_id"] = m.service_id;
  }
  void ids(uint32_t local, uint32_t remote) const {
    j["local_comm_id"] = local;
    j["remote_comm_id"] = remote;
  }
  template <size_t N>
  void cma(uint64_t sid, const std::array<uint8_t, N>& pd) const {
    if (auto h = cma_of(sid, pd)) {
      j["rdma_cm"] = {{"src", h->src.to_string()}, {"port", h->port}, {"dst", h->dst.to_string()}};
    }
  }
};

}  // namespace

// A MAD is exactly 256 bytes (IBTA 13.4.1 for the GSI's unreliable datagrams).
static std::string wrong_length(size_t n) {
  return "payload of " + std::to_string(n) + " bytes to QP 1, a MAD is " + std::to_string(kMadLen);
}

std::string mad_text(std::span<const std::byte> mad) {
  if (mad.size() != kMadLen) return " MAD MALFORMED: " + wrong_length(mad.size());
  auto h = parse_mad_header(mad);
  if (!h) return " MAD MALFORMED: " + h.error().message();
  if (h->mgmt_class != static_cast<uint8_t>(MgmtClass::kCm)) {
    return " MAD class=" + hex(h->mgmt_class, 2) + " method=" + hex(h->method, 2) +
           " attr=" + hex(h->attr_id, 4) + " TID=" + hex(h->tid, 16);
  }
  auto m = parse_cm_mad(mad);
  if (!m) return " CM MALFORMED: " + m.error().message() + " (attr " + hex(h->attr_id, 4) + ")";
  const CmAttr a = attr_of(m->msg);
  std::string s = " CM " + std::string(to_string(a)) + "(" + std::string(short_name(a)) + ")";
  if (m->hdr.method != mad_method::kSend) s += " method=" + hex(m->hdr.method, 2);
  if (m->hdr.status != 0) s += " status=" + hex(m->hdr.status, 4);
  s += " TID=" + hex(m->hdr.tid, 16);
  return s + std::visit(Text{}, m->msg);
}

Json mad_json(std::span<const std::byte> mad) {
  Json j = Json::object();
  if (mad.size() != kMadLen) return {{"error", wrong_length(mad.size())}};
  auto h = parse_mad_header(mad);
  if (!h) return {{"error", h.error().message()}};
  j["mgmt_class"] = h->mgmt_class;
  j["class_version"] = h->class_version;
  j["method"] = h->method;
  j["status"] = h->status;
  j["tid"] = h->tid;
  j["attr_id"] = h->attr_id;
  if (h->mgmt_class != static_cast<uint8_t>(MgmtClass::kCm)) return j;
  auto m = parse_cm_mad(mad);
  if (!m) {
    j["error"] = m.error().message();
    return j;
  }
  const CmAttr a = attr_of(m->msg);
  j["cm"] = short_name(a);
  j["name"] = to_string(a);
  std::visit(ToJson{j}, m->msg);
  return j;
}

}  // namespace rocelab::present
