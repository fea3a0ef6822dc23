#include "wire/cm_mad.h"

#include <cstring>

#include "wire/byte_order.h"

namespace rocelab::wire {

std::string_view to_string(CmAttr a) {
  switch (a) {
    case CmAttr::kClassPortInfo: return "ClassPortInfo";
    case CmAttr::kReq: return "ConnectRequest";
    case CmAttr::kMra: return "MsgRcptAck";
    case CmAttr::kRej: return "ConnectReject";
    case CmAttr::kRep: return "ConnectReply";
    case CmAttr::kRtu: return "ReadyToUse";
    case CmAttr::kDreq: return "DisconnectRequest";
    case CmAttr::kDrep: return "DisconnectReply";
    case CmAttr::kSidrReq: return "ServiceIDResReq";
    case CmAttr::kSidrRep: return "ServiceIDResReqResp";
    case CmAttr::kLap: return "LoadAlternatePath";
    case CmAttr::kApr: return "AlternatePathResponse";
  }
  return "unknown";
}

std::string_view short_name(CmAttr a) {
  switch (a) {
    case CmAttr::kClassPortInfo: return "ClassPortInfo";
    case CmAttr::kReq: return "REQ";
    case CmAttr::kMra: return "MRA";
    case CmAttr::kRej: return "REJ";
    case CmAttr::kRep: return "REP";
    case CmAttr::kRtu: return "RTU";
    case CmAttr::kDreq: return "DREQ";
    case CmAttr::kDrep: return "DREP";
    case CmAttr::kSidrReq: return "SIDR_REQ";
    case CmAttr::kSidrRep: return "SIDR_REP";
    case CmAttr::kLap: return "LAP";
    case CmAttr::kApr: return "APR";
  }
  return "unknown";
}

std::string_view rej_reason_name(uint16_t reason) {
  static constexpr std::string_view kNames[] = {
      "reserved",                          // 0
      "no QP available",                   // 1
      "no EEC available",                  // 2
      "no resources available",            // 3
      "timeout",                           // 4
      "unsupported request",               // 5
      "invalid communication ID",          // 6
      "invalid communication instance",    // 7
      "invalid service ID",                // 8
      "invalid transport service type",    // 9
      "stale connection",                  // 10
      "RDC does not exist",                // 11
      "primary remote port GID rejected",  // 12
      "primary remote port LID rejected",  // 13
      "invalid primary SL",                // 14
      "invalid primary traffic class",     // 15
      "invalid primary hop limit",         // 16
      "invalid primary packet rate",       // 17
      "alternate remote port GID rejected",  // 18
      "alternate remote port LID rejected",  // 19
      "invalid alternate SL",              // 20
      "invalid alternate traffic class",   // 21
      "invalid alternate hop limit",       // 22
      "invalid alternate packet rate",     // 23
      "port CM redirection",               // 24
      "port redirection",                  // 25
      "invalid path MTU",                  // 26
      "insufficient responder resources",  // 27
      "consumer reject",                   // 28
      "invalid RNR NAK retry count",       // 29
      "duplicate local communication ID",  // 30
      "invalid class version",             // 31
      "invalid primary flow label",        // 32
      "invalid alternate flow label",      // 33
      "reserved",                          // 34
      "vendor option not supported",       // 35
  };
  return reason < std::size(kNames) ? kNames[reason] : "reserved";
}

CmAttr attr_of(const CmMessage& m) {
  struct Visitor {
    CmAttr operator()(const CmReq&) const { return CmAttr::kReq; }
    CmAttr operator()(const CmMra&) const { return CmAttr::kMra; }
    CmAttr operator()(const CmRej&) const { return CmAttr::kRej; }
    CmAttr operator()(const CmRep&) const { return CmAttr::kRep; }
    CmAttr operator()(const CmRtu&) const { return CmAttr::kRtu; }
    CmAttr operator()(const CmDreq&) const { return CmAttr::kDreq; }
    CmAttr operator()(const CmDrep&) const { return CmAttr::kDrep; }
    CmAttr operator()(const CmSidrReq&) const { return CmAttr::kSidrReq; }
    CmAttr operator()(const CmSidrRep&) const { return CmAttr::kSidrRep; }
  };
  return std::visit(Visitor{}, m);
}

CmMad make_cm_mad(uint64_t tid, CmMessage msg) {
  CmMad m{MadHeader{}, std::move(msg)};
  m.hdr.base_version = kMadBaseVersion;
  m.hdr.mgmt_class = static_cast<uint8_t>(MgmtClass::kCm);
  m.hdr.class_version = kCmClassVersion;
  m.hdr.method = mad_method::kSend;
  m.hdr.tid = tid;
  m.hdr.attr_id = static_cast<uint16_t>(attr_of(m.msg));
  return m;
}

namespace {

// Writes one CM message body (232 bytes, zeroed beforehand). `fits` collects
// range checks: a value wider than its field is an error, never silently cut.
class Writer {
 public:
  explicit Writer(std::byte* p) : p_(p) {}
  bool ok() const { return ok_; }

  // Checks v < 2^bits.
  uint32_t fit(uint32_t v, int bits) {
    if (v >> bits) ok_ = false;
    return v & ((1u << bits) - 1);
  }
  void u8(size_t off, uint8_t v) { store8(p_ + off, v); }
  void u16(size_t off, uint16_t v) { store_be16(p_ + off, v); }
  void u24(size_t off, uint32_t v) { store_be24(p_ + off, fit(v, 24)); }
  void u32(size_t off, uint32_t v) { store_be32(p_ + off, v); }
  void u64(size_t off, uint64_t v) { store_be64(p_ + off, v); }
  // OR a field of `bits` bits whose lowest bit is bit `shift` of the byte at off.
  void bits(size_t off, int shift, int bits, uint32_t v) {
    store8(p_ + off, static_cast<uint8_t>(load8(p_ + off) | (fit(v, bits) << shift)));
  }
  template <size_t N>
  void bytes(size_t off, const std::array<uint8_t, N>& a) {
    std::memcpy(p_ + off, a.data(), N);
  }

 private:
  std::byte* p_;
  bool ok_ = true;
};

class Reader {
 public:
  explicit Reader(const std::byte* p) : p_(p) {}
  uint8_t u8(size_t off) const { return load8(p_ + off); }
  uint16_t u16(size_t off) const { return load_be16(p_ + off); }
  uint32_t u24(size_t off) const { return load_be24(p_ + off); }
  uint32_t u32(size_t off) const { return load_be32(p_ + off); }
  uint64_t u64(size_t off) const { return load_be64(p_ + off); }
  uint8_t bits(size_t off, int shift, int bits) const {
    return static_cast<uint8_t>((load8(p_ + off) >> shift) & ((1u << bits) - 1));
  }
  template <size_t N>
  void bytes(size_t off, std::array<uint8_t, N>& a) const {
    std::memcpy(a.data(), p_ + off, N);
  }

 private:
  const std::byte* p_;
};

// A path: LIDs, GIDs, flow label | packet rate, traffic class, hop limit,
// SL | subnet local, local ACK timeout (IBTA Table 99, 44 bytes).
void put_path(Writer& w, size_t o, const CmPath& p) {
  w.u16(o, p.local_lid);
  w.u16(o + 2, p.remote_lid);
  w.bytes(o + 4, p.local_gid);
  w.bytes(o + 20, p.remote_gid);
  // Flow label: 20 bits; 6 reserved; packet rate: 6 bits.
  w.u32(o + 36, (w.fit(p.flow_label, 20) << 12) | w.fit(p.packet_rate, 6));
  w.u8(o + 40, p.traffic_class);
  w.u8(o + 41, p.hop_limit);
  w.bits(o + 42, 4, 4, p.sl);
  w.bits(o + 42, 3, 1, p.subnet_local);
  w.bits(o + 43, 3, 5, p.local_ack_timeout);
}

CmPath get_path(const Reader& r, size_t o) {
  CmPath p;
  p.local_lid = r.u16(o);
  p.remote_lid = r.u16(o + 2);
  r.bytes(o + 4, p.local_gid);
  r.bytes(o + 20, p.remote_gid);
  const uint32_t w = r.u32(o + 36);
  p.flow_label = w >> 12;
  p.packet_rate = static_cast<uint8_t>(w & 0x3F);
  p.traffic_class = r.u8(o + 40);
  p.hop_limit = r.u8(o + 41);
  p.sl = r.bits(o + 42, 4, 4);
  p.subnet_local = r.bits(o + 42, 3, 1);
  p.local_ack_timeout = r.bits(o + 43, 3, 5);
  return p;
}

struct Encode {
  Writer& w;
  void operator()(const CmReq& m) const {
    w.u32(0, m.local_comm_id);
    w.u64(8, m.service_id);
    w.u64(16, m.local_ca_guid);
    w.u32(28, m.local_qkey);
    w.u24(32, m.local_qpn.value());
    w.u8(35, m.responder_resources);
    w.u24(36, m.local_eecn);
    w.u8(39, m.initiator_depth);
    w.u24(40, m.remote_eecn);
    w.bits(43, 3, 5, m.remote_cm_response_timeout);
    w.bits(43, 1, 2, static_cast<uint8_t>(m.transport));
    w.bits(43, 0, 1, m.end_to_end_flow_control);
    w.u24(44, m.starting_psn.value());
    w.bits(47, 3, 5, m.local_cm_response_timeout);
    w.bits(47, 0, 3, m.retry_count);
    w.u16(48, m.pkey);
    w.bits(50, 4, 4, m.path_mtu);
    w.bits(50, 3, 1, m.rdc_exists);
    w.bits(50, 0, 3, m.rnr_retry_count);
    w.bits(51, 4, 4, m.max_cm_retries);
    w.bits(51, 3, 1, m.srq);
    w.bits(51, 0, 3, m.extended_transport);
    put_path(w, 52, m.primary);
    put_path(w, 96, m.alternate);
    w.bytes(140, m.private_data);
  }
  void operator()(const CmMra& m) const {
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.bits(8, 6, 2, static_cast<uint8_t>(m.message_mraed));
    w.bits(9, 3, 5, m.service_timeout);
    w.bytes(10, m.private_data);
  }
  void operator()(const CmRej& m) const {
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.bits(8, 6, 2, static_cast<uint8_t>(m.message_rejected));
    w.bits(9, 1, 7, m.reject_info_length);
    w.u16(10, m.reason);
    w.bytes(12, m.ari);
    w.bytes(84, m.private_data);
  }
  void operator()(const CmRep& m) const {
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.u32(8, m.local_qkey);
    w.u24(12, m.local_qpn.value());
    w.u24(16, m.local_eecn);
    w.u24(20, m.starting_psn.value());
    w.u8(24, m.responder_resources);
    w.u8(25, m.initiator_depth);
    w.bits(26, 3, 5, m.target_ack_delay);
    w.bits(26, 1, 2, m.failover_accepted);
    w.bits(26, 0, 1, m.end_to_end_flow_control);
    w.bits(27, 5, 3, m.rnr_retry_count);
    w.bits(27, 4, 1, m.srq);
    w.u64(28, m.local_ca_guid);
    w.bytes(36, m.private_data);
  }
  void operator()(const CmRtu& m) const {
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.bytes(8, m.private_data);
  }
  void operator()(const CmDreq& m) const {
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.u24(8, m.remote_qpn.value());
    w.bytes(12, m.private_data);
  }
  void operator()(const CmDrep& m) const {
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.bytes(8, m.private_data);
  }
  void operator()(const CmSidrReq& m) const {
    w.u32(0, m.request_id);
    w.u16(4, m.pkey);
    w.u64(8, m.service_id);
    w.bytes(16, m.private_data);
  }
  void operator()(const CmSidrRep& m) const {
    w.u32(0, m.request_id);
    w.u8(4, m.status);
    w.u8(5, m.additional_info_length);
    w.u24(8, m.qpn.value());
    w.u64(12, m.service_id);
    w.u32(20, m.qkey);
    w.bytes(24, m.class_port_info);
    w.bytes(96, m.private_data);
  }
};

CmReq get_req(const Reader& r) {
  CmReq m;
  m.local_comm_id = r.u32(0);
  m.service_id = r.u64(8);
  m.local_ca_guid = r.u64(16);
  m.local_qkey = r.u32(28);
  m.local_qpn = Qpn(r.u24(32));
  m.responder_resources = r.u8(35);
  m.local_eecn = r.u24(36);
  m.initiator_depth = r.u8(39);
  m.remote_eecn = r.u24(40);
  m.remote_cm_response_timeout = r.bits(43, 3, 5);
  m.transport = static_cast<CmTransport>(r.bits(43, 1, 2));
  m.end_to_end_flow_control = r.bits(43, 0, 1);
  m.starting_psn = Psn(r.u24(44));
  m.local_cm_response_timeout = r.bits(47, 3, 5);
  m.retry_count = r.bits(47, 0, 3);
  m.pkey = r.u16(48);
  m.path_mtu = r.bits(50, 4, 4);
  m.rdc_exists = r.bits(50, 3, 1);
  m.rnr_retry_count = r.bits(50, 0, 3);
  m.max_cm_retries = r.bits(51, 4, 4);
  m.srq = r.bits(51, 3, 1);
  m.extended_transport = r.bits(51, 0, 3);
  m.primary = get_path(r, 52);
  m.alternate = get_path(r, 96);
  r.bytes(140, m.private_data);
  return m;
}

CmMra get_mra(const Reader& r) {
  CmMra m;
  m.local_comm_id = r.u32(0);
  m.remote_comm_id = r.u32(4);
  m.message_mraed = static_cast<CmMsgRef>(r.bits(8, 6, 2));
  m.service_timeout = r.bits(9, 3, 5);
  r.bytes(10, m.private_data);
  return m;
}

CmRej get_rej(const Reader& r) {
  CmRej m;
  m.local_comm_id = r.u32(0);
  m.remote_comm_id = r.u32(4);
  m.message_rejected = static_cast<CmMsgRef>(r.bits(8, 6, 2));
  m.reject_info_length = r.bits(9, 1, 7);
  m.reason = r.u16(10);
  r.bytes(12, m.ari);
  r.bytes(84, m.private_data);
  return m;
}

CmRep get_rep(const Reader& r) {
  CmRep m;
  m.local_comm_id = r.u32(0);
  m.remote_comm_id = r.u32(4);
  m.local_qkey = r.u32(8);
  m.local_qpn = Qpn(r.u24(12));
  m.local_eecn = r.u24(16);
  m.starting_psn = Psn(r.u24(20));
  m.responder_resources = r.u8(24);
  m.initiator_depth = r.u8(25);
  m.target_ack_delay = r.bits(26, 3, 5);
  m.failover_accepted = r.bits(26, 1, 2);
  m.end_to_end_flow_control = r.bits(26, 0, 1);
  m.rnr_retry_count = r.bits(27, 5, 3);
  m.srq = r.bits(27, 4, 1);
  m.local_ca_guid = r.u64(28);
  r.bytes(36, m.private_data);
  return m;
}

template <typename T>
T get_ids_and_private(const Reader& r, size_t pd_off) {
  T m;
  m.local_comm_id = r.u32(0);
  m.remote_comm_id = r.u32(4);
  r.bytes(pd_off, m.private_data);
  return m;
}

CmDreq get_dreq(const Reader& r) {
  CmDreq m = get_ids_and_private<CmDreq>(r, 12);
  m.remote_qpn = Qpn(r.u24(8));
  return m;
}

CmSidrReq get_sidr_req(const Reader& r) {
  CmSidrReq m;
  m.request_id = r.u32(0);
  m.pkey = r.u16(4);
  m.service_id = r.u64(8);
  r.bytes(16, m.private_data);
  return m;
}

CmSidrRep get_sidr_rep(const Reader& r) {
  CmSidrRep m;
  m.request_id = r.u32(0);
  m.status = r.u8(4);
  m.additional_info_length = r.u8(5);
  m.qpn = Qpn(r.u24(8));
  m.service_id = r.u64(12);
  m.qkey = r.u32(20);
  r.bytes(24, m.class_port_info);
  r.bytes(96, m.private_data);
  return m;
}

}  // namespace

Result<size_t> encode_cm_mad(std::span<std::byte> out, const CmMad& m) {
  if (out.size() < kMadLen) return WireErrc::kBufferTooSmall;
  std::memset(out.data(), 0, kMadLen);
  MadHeader h = m.hdr;
  h.attr_id = static_cast<uint16_t>(attr_of(m.msg));
  h.store(out.data());
  Writer w(out.data() + kMadHeaderLen);
  std::visit(Encode{w}, m.msg);
  if (!w.ok()) {
    std::memset(out.data(), 0, kMadLen);  // no half-valid MAD left behind
    return WireErrc::kFieldOutOfRange;
  }
  return kMadLen;
}

Result<CmMad> parse_cm_mad(std::span<const std::byte> mad) {
  auto h = parse_mad_header(mad);
  if (!h) return h.error();
  if (h->mgmt_class != static_cast<uint8_t>(MgmtClass::kCm)) return WireErrc::kNotCmMad;
  if (h->class_version != kCmClassVersion) return WireErrc::kBadMad;
  if (mad.size() < kMadLen) return WireErrc::kTruncated;
  const Reader r(mad.data() + kMadHeaderLen);
  switch (static_cast<CmAttr>(h->attr_id)) {
    case CmAttr::kReq: return CmMad{*h, get_req(r)};
    case CmAttr::kMra: return CmMad{*h, get_mra(r)};
    case CmAttr::kRej: return CmMad{*h, get_rej(r)};
    case CmAttr::kRep: return CmMad{*h, get_rep(r)};
    case CmAttr::kRtu: return CmMad{*h, get_ids_and_private<CmRtu>(r, 8)};
    case CmAttr::kDreq: return CmMad{*h, get_dreq(r)};
    case CmAttr::kDrep: return CmMad{*h, get_ids_and_private<CmDrep>(r, 8)};
    case CmAttr::kSidrReq: return CmMad{*h, get_sidr_req(r)};
    case CmAttr::kSidrRep: return CmMad{*h, get_sidr_rep(r)};
    case CmAttr::kClassPortInfo:
    case CmAttr::kLap:
    case CmAttr::kApr: break;
  }
  return WireErrc::kUnknownCmAttribute;
}

}  // namespace rocelab::wire
