// The plain data of the rdma_cm API (src/cm/rdma_cm.h): addresses, port
// spaces, connection parameters, events. Field names and meanings follow
// <rdma/rdma_cma.h> (struct rdma_conn_param, struct rdma_ud_param, struct
// rdma_cm_event, enum rdma_cm_event_type, enum rdma_port_space) and numeric
// values are equal, so src/rdmacm_shim converts with static_cast and copies
// field by field. This file must not include any librdmacm header (src/cm does
// not depend on librdmacm).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "emu/verbs_attrs.h"
#include "emu/verbs_types.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {
class Device;
}

namespace rocelab::cm {

// enum rdma_ucm_port_space. The service ID of a REQ / SIDR_REQ is
// (port_space << 16) | port (wire/cma_hdr.h).
enum class PortSpace : uint16_t { kIpoib = 0x0002, kTcp = 0x0106, kUdp = 0x0111, kIb = 0x013F };

// An IP endpoint: struct sockaddr_in / sockaddr_in6 without the family games.
// ip all zero (v4 or v6) is the wildcard address (INADDR_ANY / in6addr_any).
// port is in host order (sin_port is network order: the shim converts).
// AF_IB addresses (struct sockaddr_ib) are not supported: calls given one fail
// with EAFNOSUPPORT in the shim; RDMA_PS_IB with IP addresses works.
struct SockAddr {
  wire::IpAddr ip;
  uint16_t port = 0;
  bool is_any() const;
  bool operator==(const SockAddr&) const = default;
};

// Handles. An id handle is never reused during the life of a Cm (a 64-bit
// counter starting at 1); 0 is "none". The same for channel handles.
using IdHandle = uint64_t;
using ChannelHandle = uint64_t;
inline constexpr IdHandle kNoId = 0;

// Largest private data of any event: RTU/DREP carry 224 bytes, REP 196,
// REJ 148, SIDR_REP 136; a REQ's is 56 after rdma_cm's 36-byte header, a
// SIDR_REQ's 180. What the peer did not fill is zero (private data has no
// length on the wire: the length an event reports is the field size, as the
// kernel reports it).
inline constexpr size_t kMaxPrivateData = 224;

// What a side passes in to connect / accept: struct rdma_conn_param. The
// shim fills it as librdmacm does before the kernel call (rdma_connect:
// responder_resources/initiator_depth RDMA_MAX_RESP_RES/RDMA_MAX_INIT_DEPTH
// replaced by the device maximum, qp_num from id->qp when the id has a QP,
// srq from id->srq).
struct ConnParam {
  std::span<const uint8_t> private_data;  // copied during the call
  uint8_t responder_resources = 0;  // READ/atomic this side accepts as responder
  uint8_t initiator_depth = 0;      // READ/atomic this side issues as requester
  uint8_t flow_control = 0;         // REQ/REP end-to-end flow control bit
  uint8_t retry_count = 7;          // 3 bits; ignored on accept (the REQ's counts)
  uint8_t rnr_retry_count = 7;      // 3 bits
  uint8_t srq = 0;                  // the QP uses an SRQ
  uint32_t qp_num = 0;              // 24 bits: the local QP this connection is for
};

// enum rdma_cm_event_type (same values).
enum class EventType : uint8_t {
  kAddrResolved = 0,
  kAddrError = 1,
  kRouteResolved = 2,
  kRouteError = 3,
  kConnectRequest = 4,
  kConnectResponse = 5,
  kConnectError = 6,
  kUnreachable = 7,
  kRejected = 8,
  kEstablished = 9,
  kDisconnected = 10,
  kDeviceRemoval = 11,
  kMulticastJoin = 12,
  kMulticastError = 13,
  kAddrChange = 14,
  kTimewaitExit = 15,
};
// "RDMA_CM_EVENT_ADDR_RESOLVED", ... (rdma_event_str's strings).
std::string_view to_string(EventType t);

// The connection parameters an event reports (struct rdma_conn_param as the
// kernel fills event->param.conn), seen from the receiver of the event:
// - kConnectRequest (from the REQ): responder_resources = the REQ's initiator
//   depth, initiator_depth = the REQ's responder resources (swapped, as the
//   kernel's cm_format_req_event does), flow_control, retry_count,
//   rnr_retry_count, srq, qp_num = the active side's QPN.
// - kConnectResponse / kEstablished on the active side (from the REP):
//   responder_resources/initiator_depth swapped likewise, flow_control,
//   rnr_retry_count, srq, qp_num = the passive side's QPN.
// - kEstablished on the passive side: the values of the REQ, as for
//   kConnectRequest (the kernel reports zeros there; we report the REQ).
struct EventConnParam {
  uint8_t responder_resources = 0, initiator_depth = 0, flow_control = 0, retry_count = 0,
          rnr_retry_count = 0, srq = 0;
  uint32_t qp_num = 0;
};

// struct rdma_ud_param: kEstablished on an active UDP id (from the SIDR_REP),
// kConnectRequest on a UDP listener (from the SIDR_REQ: ah_attr towards the
// requester, qp_num 0 and qkey 0 since a SIDR_REQ carries neither), and
// kMulticastJoin (ah_attr.dgid = the multicast GID, qp_num 0xFFFFFF, qkey).
struct EventUdParam {
  emu::AhAttr ah_attr;  // is_global, dgid = the peer's GID (::ffff:a.b.c.d), sgid_index 0,
                        // hop_limit, traffic_class from the route, port_num 1
  uint32_t qp_num = 0;
  uint32_t qkey = 0;
};

// One event: everything struct rdma_cm_event needs.
struct Event {
  EventType type = EventType::kAddrResolved;
  // 0 on success. Negative errno for failures (kAddrError -EHOSTUNREACH /
  // -ENETUNREACH / -ETIMEDOUT, kRouteError, kUnreachable -ETIMEDOUT,
  // kConnectError). kRejected: the REJ reason (positive, IBTA Table 103: 8 no
  // listener = invalid service ID, 28 consumer reject, 6 invalid comm ID ...),
  // as the kernel's cma_ib_handler reports it. UDP ids: a SIDR_REP with a
  // status other than 0 gives kUnreachable with status = the SIDR status
  // (positive: 1 no listener = service ID not supported, 2 rejected), as the
  // kernel's cma_sidr_rep_handler; an unanswered SIDR_REQ kUnreachable -ETIMEDOUT.
  int status = 0;
  IdHandle id = kNoId;         // the id the event is for; kConnectRequest: the NEW id
  IdHandle listen_id = kNoId;  // kConnectRequest: the listening id; else kNoId
  void* id_context = nullptr;  // the context of `id` when the event was taken (set_context)
  void* listen_context = nullptr;  // the context of listen_id
  EventConnParam conn;         // connected port spaces (see EventConnParam)
  EventUdParam ud;             // UDP port space and multicast
  // kMulticastJoin / kMulticastError: the group and the context given to join_multicast
  // (librdmacm reports that context as event->param.ud.private_data).
  SockAddr mc_group;
  void* mc_context = nullptr;
  std::array<uint8_t, kMaxPrivateData> private_data{};
  uint8_t private_data_len = 0;  // 0 when the event has no private data
  std::span<const uint8_t> data() const { return {private_data.data(), private_data_len}; }
};

// What rdma_cm_id's public fields need (route, addresses, port), and the id's state.
enum class IdState : uint8_t {
  kIdle,            // created
  kAddrQuery,       // resolve_addr in progress
  kAddrResolved,    // or bound to an address
  kAddrBound,
  kRouteQuery,
  kRouteResolved,
  kConnect,         // REQ or SIDR_REQ sent
  kConnectResponse, // REP received, kConnectResponse delivered, waiting for establish()
  kListen,
  kConnectRequest,  // passive: REQ received, waiting for accept/reject
  kAccepted,        // passive: REP sent, waiting for RTU
  kEstablished,
  kDisconnect,      // DREQ sent or received
  kTimewait,
  kDestroying,
};
std::string_view to_string(IdState s);

struct IdInfo {
  PortSpace ps = PortSpace::kTcp;
  emu::QpType qp_type = emu::QpType::kRC;
  IdState state = IdState::kIdle;
  ChannelHandle channel = 0;
  SockAddr src, dst;            // route.addr.src_addr / dst_addr (port 0 until known)
  bool bound = false;           // has a device (bind to a specific address, resolve_addr)
  emu::Device* device = nullptr;  // the device it is bound to (nullptr: unbound or wildcard)
  uint8_t port_num = 0;         // 1 once bound to a device, else 0 (rdma_cm_id.port_num)
  // route.path_rec[0] once the route is resolved (num_paths 1), else num_paths 0:
  int num_paths = 0;
  emu::Gid sgid{}, dgid{};      // also route.addr.addr.ibaddr.sgid/dgid (::ffff:a.b.c.d)
  uint16_t pkey = 0xFFFF;
  emu::Mtu path_mtu = emu::Mtu::k1024;  // the device's active MTU
  uint8_t hop_limit = 64, traffic_class = 0, packet_life_time = 18;
  uint32_t qkey = 0;            // UDP: RDMA_UDP_QKEY 0x01234567
};

// Per-id options (rdma_set_option).
struct IdOptions {
  bool has_tos = false;
  uint8_t tos = 0;
  bool has_ack_timeout = false;
  uint8_t ack_timeout = 0;  // the QP's local ACK timeout (RTS timeout), 5 bits
  bool reuseaddr = false;
  bool afonly = false;
};

}  // namespace rocelab::cm
