// Internal: the state of a Cm (rdma_cm.h) shared by its roles:
//   rdma_cm.cc   ids, channels and events, bind/listen tables, the public calls
//   addr.cc      which addresses are ours, routes, ephemeral ports
//   mad_agent.cc QP 1 of each device: parsing, dispatch, TIDs, retransmission
//   ib_cm.cc     the IBTA 12.9 connection state machine (REQ ... DREP)
//   sidr.cc      SIDR_REQ / SIDR_REP for RDMA_PS_UDP
// One mutex (Impl::mu) guards all of it. Code that sends MADs or touches
// timers also holds the device's lock (taken first: emu/gsi.h).
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include "cm/rdma_cm.h"
#include "emu/gsi.h"
#include "wire/cm_mad.h"

namespace rocelab::cm {

using Nanos = std::chrono::nanoseconds;
using MadBuf = std::array<std::byte, wire::kMadLen>;

inline constexpr uint32_t kRdmaUdpQkey = 0x01234567;  // RDMA_UDP_QKEY
inline constexpr size_t kReqPrivate = 92, kRepPrivate = 196, kRejPrivate = 148,
                        kSidrReqPrivate = 216, kSidrRepPrivate = 136, kRtuPrivate = 224,
                        kDreqPrivate = 220, kDrepPrivate = 224;

// IBA time: 4.096 us * 2^t.
constexpr Nanos iba_time(uint8_t t) { return Nanos(int64_t{4096} << (t > 31 ? 31 : t)); }
// The kernel's cm_ack_timeout: the path's local ACK timeout from the CA's ACK
// delay and the packet life time.
uint8_t cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time);

// IBTA 12.9.6 (the kernel's enum ib_cm_state), plus the SIDR states.
enum class CmState : uint8_t {
  kIdle, kReqSent, kMraReqRcvd, kReqRcvd, kMraReqSent, kRepSent, kMraRepRcvd, kRepRcvd,
  kMraRepSent, kEstablished, kDreqSent, kDreqRcvd, kTimewait, kSidrReqSent, kSidrReqRcvd,
  kSidrRepSent,
};
std::string_view to_string(CmState s);

using Impl = Cm::Impl;
struct DevicePort;

// One IB CM connection (or SIDR exchange): what the kernel's cm_id_private
// holds. Owned by Impl::conns (by local comm ID); it may outlive its rdma_cm
// id (a destroyed id's connection still finishes its DREQ and timewait).
struct Conn {
  DevicePort* port = nullptr;
  IdHandle id = kNoId;  // kNoId once the id is gone
  bool active = false;
  bool udp = false;  // SIDR
  CmState state = CmState::kIdle;
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint64_t tid = 0;     // the TID of the exchange (the REQ's; our own for DREQ)
  uint64_t dreq_tid = 0;  // the peer's DREQ (for the DREP)
  wire::IpAddr peer;    // where MADs go
  uint8_t tclass = 0, hop_limit = 64;
  uint64_t service_id = 0;
  emu::QpType qp_type = emu::QpType::kRC;
  uint32_t local_qpn = 0, remote_qpn = 0;
  uint32_t local_psn = 0;   // our starting PSN: our rq_psn
  uint32_t remote_psn = 0;  // the peer's: our sq_psn
  uint8_t responder_resources = 0, initiator_depth = 0;  // ours
  uint8_t retry_count = 7, rnr_retry_count = 7;
  bool srq = false, flow_control = false;
  emu::Mtu path_mtu = emu::Mtu::k1024;
  uint8_t ack_timeout = 19;       // the path's local ACK timeout (av.timeout)
  uint8_t peer_cm_timeout = 20;   // how long the peer may take to answer (coded)
  uint8_t max_cm_retries = 15;
  uint32_t qkey = 0;  // SIDR: the Q_Key the SIDR_REP carried / carries
  bool mra_delay = false;  // passive: an MRA goes out on a duplicate REQ / REP
  bool will = false;       // its farewell DREQ is with CmConfig::farewell
  // The last MAD this connection sent, kept for resends and duplicates.
  MadBuf last{};
  bool have_last = false;
  // Retransmission (mad_agent.cc).
  std::unique_ptr<emu::Timer> timer;
  int retries_left = 0;
  Nanos timeout{0};
};

// QP 1 of one device: the Cm's GsiClient for it (mad_agent.cc).
struct DevicePort final : emu::GsiClient {
  Impl* impl = nullptr;
  emu::Device* dev = nullptr;
  uint32_t hi_tid = 0;
  emu::Mtu mtu = emu::Mtu::k1024;  // the port's active MTU
  uint8_t ack_delay = 15;          // local_ca_ack_delay
  uint64_t guid = 0;               // node GUID, host order
  void on_mad(const emu::GsiMad& m) override;
  void on_unreachable(const wire::IpAddr& peer) override;
};

struct Channel {
  int efd = -1;
  std::deque<Event> q;
  int ids = 0;
};

struct Id {
  IdHandle h = kNoId;
  ChannelHandle ch = 0;
  PortSpace ps = PortSpace::kTcp;
  emu::QpType qp_type = emu::QpType::kRC;
  void* context = nullptr;
  IdState state = IdState::kIdle;
  IdOptions opt;
  SockAddr src, dst;
  bool bound = false;           // src.port is reserved in the port table
  DevicePort* port = nullptr;   // the device (nullptr: none / wildcard)
  bool routed = false;
  int backlog = 0, pending = 0;  // listeners: requests queued, not yet taken
  IdHandle listener = kNoId;     // new ids: the listener whose backlog they count in
  bool counted = false;          // still counted in listener's pending
  uint32_t conn = 0;             // local comm ID of its connection (0: none)
  std::vector<std::pair<SockAddr, void*>> groups;  // multicast: group, join context
};

class Cm::Impl {
 public:
  explicit Impl(CmConfig c);
  ~Impl();

  CmConfig cfg;
  mutable std::mutex mu;
  std::mt19937_64 rng;
  std::vector<std::unique_ptr<DevicePort>> ports;
  std::map<ChannelHandle, Channel> channels;
  std::map<IdHandle, Id> ids;
  std::unordered_map<uint32_t, std::unique_ptr<Conn>> conns;  // by local comm ID
  uint64_t next_handle = 1;
  uint32_t next_comm = 1, comm_operand = 0;
  uint32_t next_hi_tid = 2;
  Cm::Stats stats;

  // ---- rdma_cm.cc ----
  Id* find_id(IdHandle h);
  void queue_event(Id& id, Event ev);  // on id's channel
  IdHandle new_id(ChannelHandle ch, PortSpace ps, emu::QpType t);
  // A REQ / SIDR_REQ for service (ps, port) arrived on port at dst: the listener, or null.
  Id* find_listener(PortSpace ps, uint16_t port_no, const DevicePort& on, const wire::IpAddr& dst);
  // CmConfig::on_listens: the Service IDs each device listens on (under mu),
  // then told (without it).
  std::vector<std::pair<emu::Device*, std::vector<uint64_t>>> listens_locked() const;
  void publish_listens();

  // ---- addr.cc ----
  RouteVerdict route(const emu::Device& from, const wire::IpAddr& dst) const;
  DevicePort* port_for(const wire::IpAddr& ip) const;
  // Reserves addr.port (0: an ephemeral one, written back) for id. EADDRINUSE.
  std::error_code reserve_port(Id& id, SockAddr* addr);
  uint32_t random24() { return static_cast<uint32_t>(rng()) & 0xFFFFFF; }

  // ---- mad_agent.cc ----
  uint32_t new_comm_id(const DevicePort& p);
  uint64_t form_tid(const DevicePort& p, uint32_t local_comm_id) const;
  Conn& new_conn(DevicePort& p);
  Conn* find_conn(uint32_t local_comm_id);
  void erase_conn(uint32_t local_comm_id);
  // Device lock and mu held. Sends m to c.peer and keeps it as c's last MAD;
  // with retries > 0 arms c's timer for `timeout` and resends up to retries times.
  void send(Conn& c, const wire::CmMad& m, int retries, Nanos timeout);
  void resend_last(Conn& c);  // a reply to a duplicate: the same MAD again
  void stop_timer(Conn& c);
  // A MAD that belongs to no connection (REJ to an unknown service, DREP to an
  // unmatched DREQ ...): sent once from port to dst.
  void send_unconnected(DevicePort& p, const wire::IpAddr& dst, uint8_t tclass, const wire::CmMad& m);
  void on_timer(uint32_t local_comm_id);  // the retransmit/timewait timer fired
  // CmConfig::farewell: c (just established) leaves its DREQ; withdrawn when
  // it leaves kEstablished (send_dreq, recv_dreq, timewait, erase_conn).
  void write_will(Conn& c);
  void withdraw_will(Conn& c);

  // ---- ib_cm.cc (device lock and mu held) ----
  std::error_code send_req(Id& id, const ConnParam& p);
  std::error_code send_rep(Id& id, Conn& c, const ConnParam& p);
  std::error_code send_rej(Conn& c, uint16_t reason, std::span<const uint8_t> pd);
  std::error_code send_rtu(Conn& c);
  std::error_code send_dreq(Conn& c);
  std::error_code send_drep(Conn& c);
  void enter_timewait(Conn& c);
  void abandon(Conn& c);  // destroy_id / disconnect while connecting
  void recv_req(DevicePort& p, const emu::GsiMad& g, const wire::MadHeader& h, const wire::CmReq& m);
  void recv_mra(const wire::CmMra& m);
  void recv_rej(const wire::CmRej& m);
  void recv_rep(DevicePort& p, const emu::GsiMad& g, const wire::MadHeader& h, const wire::CmRep& m);
  void recv_rtu(const wire::CmRtu& m);
  void recv_dreq(DevicePort& p, const emu::GsiMad& g, const wire::MadHeader& h, const wire::CmDreq& m);
  void recv_drep(const wire::CmDrep& m);
  void conn_timeout(Conn& c);       // retries exhausted
  void peer_unreachable(DevicePort& p, const wire::IpAddr& peer);

  // ---- sidr.cc (device lock and mu held) ----
  std::error_code send_sidr_req(Id& id, const ConnParam& p);
  std::error_code send_sidr_rep(Id& id, Conn& c, uint8_t status, uint32_t qpn,
                                std::span<const uint8_t> pd);
  void recv_sidr_req(DevicePort& p, const emu::GsiMad& g, const wire::MadHeader& h,
                     const wire::CmSidrReq& m);
  void recv_sidr_rep(const wire::CmSidrRep& m);
};

// Fills an event's private data from a wire field (the whole field, as the kernel).
template <size_t N>
void set_private(Event& ev, const std::array<uint8_t, N>& f, size_t from = 0) {
  static_assert(N <= kMaxPrivateData + 36);
  const size_t n = N - from;
  std::copy(f.begin() + static_cast<long>(from), f.end(), ev.private_data.begin());
  ev.private_data_len = static_cast<uint8_t>(n);
}
// Copies application private data into a wire field; false when it does not fit.
template <size_t N>
bool copy_private(std::array<uint8_t, N>& f, std::span<const uint8_t> pd, size_t at = 0) {
  if (pd.size() > N - at) return false;
  std::copy(pd.begin(), pd.end(), f.begin() + static_cast<long>(at));
  return true;
}

}  // namespace rocelab::cm
