#include "wire/cm_mad.h"

#include <concepts>
#include <cstring>
#include <type_traits>

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

// Each message's layout is written down once, as a function template over an
// Io that either writes the fields into a body (Writer) or reads them out of
// one (Reader): `io.u24(44, m.starting_psn)` is the REQ's starting PSN both
// ways. Offsets are from the start of the 232-byte CM message body.

// Writes one CM message body (232 bytes, zeroed beforehand). A value wider
// than its field is an error (ok() false), never silently cut.
class Writer {
 public:
  explicit Writer(std::byte* p) : p_(p) {}
  bool ok() const { return ok_; }

  void u8(size_t off, uint8_t v) { store8(p_ + off, v); }
  void u16(size_t off, uint16_t v) { store_be16(p_ + off, v); }
  void u24(size_t off, uint32_t v) { store_be24(p_ + off, fit(v, 24)); }
  void u24(size_t off, Psn v) { u24(off, v.value()); }
  void u24(size_t off, Qpn v) { u24(off, v.value()); }
  void u32(size_t off, uint32_t v) { store_be32(p_ + off, v); }
  void u64(size_t off, uint64_t v) { store_be64(p_ + off, v); }
  // A field of `n` bits whose lowest bit is bit `shift` of the byte at off
  // (bits8) or of the big-endian 32-bit word at off (bits32).
  template <typename T>
  void bits8(size_t off, int shift, int n, T v) {
    store8(p_ + off, static_cast<uint8_t>(load8(p_ + off) | (fit(static_cast<uint32_t>(v), n) << shift)));
  }
  template <typename T>
  void bits32(size_t off, int shift, int n, T v) {
    store_be32(p_ + off, load_be32(p_ + off) | (fit(static_cast<uint32_t>(v), n) << shift));
  }
  template <size_t N>
  void bytes(size_t off, const std::array<uint8_t, N>& a) {
    std::memcpy(p_ + off, a.data(), N);
  }

 private:
  uint32_t fit(uint32_t v, int n) {
    if (v >> n) ok_ = false;
    return v & ((1u << n) - 1);
  }
  std::byte* p_;
  bool ok_ = true;
};

class Reader {
 public:
  explicit Reader(const std::byte* p) : p_(p) {}
  void u8(size_t off, uint8_t& v) const { v = load8(p_ + off); }
  void u16(size_t off, uint16_t& v) const { v = load_be16(p_ + off); }
  void u24(size_t off, uint32_t& v) const { v = load_be24(p_ + off); }
  void u24(size_t off, Psn& v) const { v = Psn(load_be24(p_ + off)); }
  void u24(size_t off, Qpn& v) const { v = Qpn(load_be24(p_ + off)); }
  void u32(size_t off, uint32_t& v) const { v = load_be32(p_ + off); }
  void u64(size_t off, uint64_t& v) const { v = load_be64(p_ + off); }
  template <typename T>
  void bits8(size_t off, int shift, int n, T& v) const {
    v = static_cast<T>((load8(p_ + off) >> shift) & ((1u << n) - 1));
  }
  template <typename T>
  void bits32(size_t off, int shift, int n, T& v) const {
    v = static_cast<T>((load_be32(p_ + off) >> shift) & ((1u << n) - 1));
  }
  template <size_t N>
  void bytes(size_t off, std::array<uint8_t, N>& a) const {
    std::memcpy(a.data(), p_ + off, N);
  }

 private:
  const std::byte* p_;
};

// M is the message type, const when writing.
template <typename M, typename T>
concept Msg = std::same_as<std::remove_const_t<M>, T>;

// A path: LIDs, GIDs, flow label | packet rate, traffic class, hop limit,
// SL | subnet local, local ACK timeout (IBTA Table 99, 44 bytes at o).
template <typename Io, Msg<CmPath> P>
void layout(Io& io, size_t o, P& p) {
  io.u16(o, p.local_lid);
  io.u16(o + 2, p.remote_lid);
  io.bytes(o + 4, p.local_gid);
  io.bytes(o + 20, p.remote_gid);
  io.bits32(o + 36, 12, 20, p.flow_label);  // then 6 reserved bits
  io.bits32(o + 36, 0, 6, p.packet_rate);
  io.u8(o + 40, p.traffic_class);
  io.u8(o + 41, p.hop_limit);
  io.bits8(o + 42, 4, 4, p.sl);
  io.bits8(o + 42, 3, 1, p.subnet_local);
  io.bits8(o + 43, 3, 5, p.local_ack_timeout);
}

template <typename Io, Msg<CmReq> M>
void layout(Io& io, M& m) {
  io.u32(0, m.local_comm_id);
  io.u64(8, m.service_id);
  io.u64(16, m.local_ca_guid);
  io.u32(28, m.local_qkey);
  io.u24(32, m.local_qpn);
  io.u8(35, m.responder_resources);
  io.u24(36, m.local_eecn);
  io.u8(39, m.initiator_depth);
  io.u24(40, m.remote_eecn);
  io.bits8(43, 3, 5, m.remote_cm_response_timeout);
  io.bits8(43, 1, 2, m.transport);
  io.bits8(43, 0, 1, m.end_to_end_flow_control);
  io.u24(44, m.starting_psn);
  io.bits8(47, 3, 5, m.local_cm_response_timeout);
  io.bits8(47, 0, 3, m.retry_count);
  io.u16(48, m.pkey);
  io.bits8(50, 4, 4, m.path_mtu);
  io.bits8(50, 3, 1, m.rdc_exists);
  io.bits8(50, 0, 3, m.rnr_retry_count);
  io.bits8(51, 4, 4, m.max_cm_retries);
  io.bits8(51, 3, 1, m.srq);
  io.bits8(51, 0, 3, m.extended_transport);
  layout(io, 52, m.primary);
  layout(io, 96, m.alternate);
  io.bytes(140, m.private_data);
}

template <typename Io, Msg<CmMra> M>
void layout(Io& io, M& m) {
  io.u32(0, m.local_comm_id);
  io.u32(4, m.remote_comm_id);
  io.bits8(8, 6, 2, m.message_mraed);
  io.bits8(9, 3, 5, m.service_timeout);
  io.bytes(10, m.private_data);
}

template <typename Io, Msg<CmRej> M>
void layout(Io& io, M& m) {
  io.u32(0, m.local_comm_id);
  io.u32(4, m.remote_comm_id);
  io.bits8(8, 6, 2, m.message_rejected);
  io.bits8(9, 1, 7, m.reject_info_length);
  io.u16(10, m.reason);
  io.bytes(12, m.ari);
  io.bytes(84, m.private_data);
}

template <typename Io, Msg<CmRep> M>
void layout(Io& io, M& m) {
  io.u32(0, m.local_comm_id);
  io.u32(4, m.remote_comm_id);
  io.u32(8, m.local_qkey);
  io.u24(12, m.local_qpn);
  io.u24(16, m.local_eecn);
  io.u24(20, m.starting_psn);
  io.u8(24, m.responder_resources);
  io.u8(25, m.initiator_depth);
  io.bits8(26, 3, 5, m.target_ack_delay);
  io.bits8(26, 1, 2, m.failover_accepted);
  io.bits8(26, 0, 1, m.end_to_end_flow_control);
  io.bits8(27, 5, 3, m.rnr_retry_count);
  io.bits8(27, 4, 1, m.srq);
  io.u64(28, m.local_ca_guid);
  io.bytes(36, m.private_data);
}

template <typename Io, Msg<CmRtu> M>
void layout(Io& io, M& m) {
  io.u32(0, m.local_comm_id);
  io.u32(4, m.remote_comm_id);
  io.bytes(8, m.private_data);
}

template <typename Io, Msg<CmDreq> M>
void layout(Io& io, M& m) {
  io.u32(0, m.local_comm_id);
  io.u32(4, m.remote_comm_id);
  io.u24(8, m.remote_qpn);
  io.bytes(12, m.private_data);
}

template <typename Io, Msg<CmDrep> M>
void layout(Io& io, M& m) {
  io.u32(0, m.local_comm_id);
  io.u32(4, m.remote_comm_id);
  io.bytes(8, m.private_data);
}

template <typename Io, Msg<CmSidrReq> M>
void layout(Io& io, M& m) {
  io.u32(0, m.request_id);
  io.u16(4, m.pkey);
  io.u64(8, m.service_id);
  io.bytes(16, m.private_data);
}

template <typename Io, Msg<CmSidrRep> M>
void layout(Io& io, M& m) {
  io.u32(0, m.request_id);
  io.u8(4, m.status);
  io.u8(5, m.additional_info_length);
  io.u24(8, m.qpn);
  io.u64(12, m.service_id);
  io.u32(20, m.qkey);
  io.bytes(24, m.class_port_info);
  io.bytes(96, m.private_data);
}

template <typename T>
CmMad parsed(const MadHeader& h, const Reader& r) {
  T m;
  layout(r, m);
  return CmMad{h, std::move(m)};
}

}  // namespace

Result<size_t> encode_cm_mad(std::span<std::byte> out, const CmMad& m) {
  if (out.size() < kMadLen) return WireErrc::kBufferTooSmall;
  std::memset(out.data(), 0, kMadLen);
  MadHeader h = m.hdr;
  h.attr_id = static_cast<uint16_t>(attr_of(m.msg));
  h.store(out.data());
  Writer w(out.data() + kMadHeaderLen);
  std::visit([&w](const auto& msg) { layout(w, msg); }, m.msg);
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
    case CmAttr::kReq: return parsed<CmReq>(*h, r);
    case CmAttr::kMra: return parsed<CmMra>(*h, r);
    case CmAttr::kRej: return parsed<CmRej>(*h, r);
    case CmAttr::kRep: return parsed<CmRep>(*h, r);
    case CmAttr::kRtu: return parsed<CmRtu>(*h, r);
    case CmAttr::kDreq: return parsed<CmDreq>(*h, r);
    case CmAttr::kDrep: return parsed<CmDrep>(*h, r);
    case CmAttr::kSidrReq: return parsed<CmSidrReq>(*h, r);
    case CmAttr::kSidrRep: return parsed<CmSidrRep>(*h, r);
    case CmAttr::kClassPortInfo:
    case CmAttr::kLap:
    case CmAttr::kApr: break;
  }
  return WireErrc::kUnknownCmAttribute;
}

}  // namespace rocelab::wire
