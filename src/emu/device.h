// An emulated RoCEv2 device with one port: the entry point of the verbs engine.
// It owns its Transport (UDP sockets or a simulated-fabric node) and every
// verbs object created on it. See docs/architecture.md for the model.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "emu/gsi.h"
#include "emu/objects.h"
#include "emu/records.h"
#include "emu/snapshot.h"
#include "emu/transport/transport.h"
#include "cc/dcqcn_params.h"
#include "cc/notification_point.h"
#include "cc/rate_control.h"
#include "emu/verbs_attrs.h"
#include "wire/error.h"

namespace rocelab::emu {

using wire::Result;

struct DeviceConfig {
  std::string name = "rocelab0";
  Mtu active_mtu = Mtu::k1024;  // the port's active MTU (rxe: netdev 1500 -> 1024)
  // Start the helper thread that sleeps in Transport::wait() and runs timers
  // and receive processing while nobody polls. Off for the simulated fabric:
  // there the caller drives all progress (Device::progress / Transport::wait).
  bool helper_thread = true;
  // While the application's own poll_cq drives progress (it receives, runs
  // timers, sends), the helper thread stands back: it sleeps without waiting
  // on the socket or taking the device lock, 50 us at first and twice as long
  // each time it looks and finds the application polled in the last 50 us, up
  // to stand_back_max; when it finds no such poll, it receives and waits on
  // the socket again. It does not stand back while a CQ with a completion
  // channel is armed (someone may be blocked on its event), and req_notify_cq
  // calls it back at once. 0: the helper never stands back.
  std::chrono::nanoseconds stand_back_max{std::chrono::milliseconds(1)};
  // retry_cnt 7: seven retries, then RETRY_EXC_ERR, as the IBTA and real NICs
  // have it (default); or retry forever, as Soft-RoCE (rxe) does — for labs
  // and runs that must survive heavy injected loss. Either way a peer the
  // network reports gone (ICMP unreachable) ends in RETRY_EXC_ERR.
  bool retry_forever = false;
  // Told, in a line, about the first packets (three per reason) dropped for a
  // reason that points at a misconfiguration — bad ICRC, unknown QP, wrong
  // P_Key or Q_Key, wrong source for a connected QP, QP not ready — naming
  // the peer and the likely cause. rocelab run prints them on stderr.
  std::function<void(const std::string&)> warn;
  // The block of QP numbers this device allocates from: -1, all of them
  // (0x11 upward, as rxe); b in 0..254, only b << 16 | 0x0011..0xFFFF, whose
  // top byte names the device among the processes that share its address
  // (src/host/address_group.h): what their UDP socket group is steered by.
  int qpn_block = -1;
  // Congestion control (docs/congestion.md, "DCQCN in the engine"). kNone:
  // packets leave with the ECN field their address vector gives, CE marks are
  // only counted, CNPs received are counted and ignored. kDcqcn: every QP is a
  // notification point (a CE-marked packet is answered with a CNP to the QP
  // that sent it, at most one per min_time_between_cnps) and a reaction point
  // (its requests paced at the rate DCQCN gives it, cut by CNPs), and its
  // packets are ECN-capable (ECT(0)).
  cc::Algorithm cc = cc::Algorithm::kNone;
  cc::DcqcnParams dcqcn;  // mlx5's defaults
  std::chrono::nanoseconds min_time_between_cnps = cc::kMinTimeBetweenCnpsMlx5;
  // The port's line rate: where DCQCN starts and what it never exceeds. On the
  // simulated fabric, the rate of the host's link.
  uint64_t line_rate_bps = 100'000'000'000;
  // Pacing: how far ahead of its rate a QP may get (a burst): the bytes on
  // the wire, or if longer, the time at the QP's current rate. 0 and 0 pace
  // packet by packet (the simulated fabric, whose timers are exact); on real
  // sockets a burst keeps the timer rate below the scheduler's resolution and
  // lets a QP whose timer woke late catch up.
  uint32_t pacing_burst_bytes = 0;
  std::chrono::nanoseconds pacing_burst_time{0};
  // Holding an ACK for the reply. A responder's coalesced ACK, on a QP that
  // posted a send request within the last kRecentPost, waits up to ack_hold
  // for that QP's next post_send and then leaves right after the requests it
  // builds, in the same batch. In a ping-pong (ib_write_lat, ib_send_lat)
  // the peer then receives the ACK together with the reply, in its own
  // poll_cq, and nobody has to wake a helper thread to receive the reply.
  // An ACK nobody posts after leaves when its time is up. 0 (the default):
  // every ACK leaves at the end of the receive batch that asked for it.
  std::chrono::nanoseconds ack_hold{0};
  static constexpr std::chrono::nanoseconds kRecentPost = std::chrono::milliseconds(1);
  // The RC send window: how many PSNs a QP may have sent and not yet seen
  // acknowledged. 0 (the default): 128 at any path MTU, rxe's
  // RXE_MAX_UNACKED_PSNS. Otherwise this many bytes of path MTU, between 128
  // and kMaxPsnWindow PSNs: 128 at MTU 4096 (the same bytes as 128 PSNs
  // there), 512 at MTU 1024, so a smaller MTU keeps as many bytes in flight.
  uint32_t window_bytes = 0;
  static constexpr uint32_t kMinPsnWindow = 128, kMaxPsnWindow = 512;
  PacketTap* tap = nullptr;     // not owned; may be set later with set_tap
  EventSink* events = nullptr;  // not owned; may be set later with set_event_sink
};

// The vendor id the device reports (IEEE OUI-style, non-zero so tools that
// look the vendor up do not treat it as "unknown/none").
inline constexpr uint32_t kVendorId = 0x524C42;  // "RLB"
inline constexpr uint32_t kVendorPartId = 0x7278;  // "rx"
inline constexpr uint8_t kPortNum = 1;

class Device {
 public:
  static Result<std::unique_ptr<Device>> create(std::unique_ptr<Transport> transport,
                                                DeviceConfig config);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const;
  const wire::IpAddr& address() const;  // the transport's local address
  uint64_t node_guid() const;           // host order
  int qpn_block() const;                // DeviceConfig::qpn_block
  const DeviceAttr& query_device() const;
  // The device's clock in ns (what completion timestamps count): virtual time
  // on the simulated fabric, CLOCK_MONOTONIC on UDP. ibv_query_rt_values_ex.
  uint64_t clock_ns() const;
  std::error_code query_port(uint8_t port_num, PortAttr* out) const;  // port_num must be 1
  int gid_table_len() const;
  // Index 0 is the RoCEv2 GID of the device address; the other slots are
  // unused (all zero). EINVAL beyond gid_table_len or for a port other than 1.
  std::error_code query_gid(uint8_t port_num, int index, Gid* out) const;
  std::error_code query_gid_type(uint8_t port_num, int index, GidType* out) const;
  std::error_code query_pkey(uint8_t port_num, int index, uint16_t* out) const;

  // Async events (QP fatal, CQ error, SRQ limit, port active ...) wait in
  // queues, as uverbs keeps one per open device file: queue 0 is the
  // device's own, open_async_queue() adds one (each context of the verbs shim
  // has its own). An event about a QP, CQ or SRQ goes to the queue the object
  // was given (set_async_queue; queue 0 until then, and again once its queue
  // is closed), a port event to every queue. A queue starts with
  // PORT_ACTIVE. Its fd is readable while events wait in it; get_async_event
  // blocks unless the fd is O_NONBLOCK (then EAGAIN).
  Result<uint32_t> open_async_queue();  // the errno of eventfd when it fails
  // Its events are dropped and its fd closed; EINVAL for queue 0 or one not open.
  std::error_code close_async_queue(uint32_t queue);
  int async_fd(uint32_t queue = 0) const;  // -1 for a queue not open
  void set_async_queue(Qp* qp, uint32_t queue);
  void set_async_queue(Cq* cq, uint32_t queue);
  void set_async_queue(Srq* srq, uint32_t queue);
  // taken, when given, runs with the queue locked as the event leaves it:
  // destroy_qp/cq/srq cannot complete between the two, so a caller may count
  // the event on the object it names (what the verbs shim's destroy waits on).
  // EINVAL for a queue not open.
  std::error_code get_async_event(AsyncEvent* out,
                                  const std::function<void(const AsyncEvent&)>& taken = {},
                                  uint32_t queue = 0);

  Result<Pd*> alloc_pd();
  std::error_code dealloc_pd(Pd* pd);  // EBUSY while objects use it
  Result<Mr*> reg_mr(Pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
  // EBUSY while a memory window is bound to it.
  std::error_code dereg_mr(Mr* mr);
  // Memory windows (mw.cc): a type 1 window starts valid and unbound, a type 2
  // window free; dealloc_mw unbinds a bound window first.
  Result<Mw*> alloc_mw(Pd* pd, MwType type);
  std::error_code dealloc_mw(Mw* mw);
  // The PD with this handle, the MR with this lkey (ENOENT when there is none):
  // how a second context sharing the device imports them (ibv_import_pd/mr).
  Result<Pd*> find_pd(uint32_t handle);
  Result<Mr*> find_mr(uint32_t lkey);
  Result<CompChannel*> create_comp_channel();
  std::error_code destroy_comp_channel(CompChannel* ch);  // EBUSY while a CQ uses it
  Result<Cq*> create_cq(int cqe, CompChannel* channel, int comp_vector);
  std::error_code destroy_cq(Cq* cq);  // EBUSY while a QP uses it
  Result<Srq*> create_srq(Pd* pd, const SrqAttr& attr);
  // An XRC SRQ (ibv_create_srq_ex, IBV_SRQT_XRC): receives of messages that
  // name it in their XRCETH, on XRC target QPs of the same domain, with buffers
  // of pd, completing on cq.
  Result<Srq*> create_xrc_srq(Pd* pd, Xrcd* xrcd, Cq* cq, const SrqAttr& attr);
  // XRC domains (ibv_open_xrcd). file_key 0: a new, private domain. Otherwise
  // the domain of that file (an inode's identity): EAGAIN (as uverbs) when there is none
  // and !create; EINVAL when there is one and exclusive (O_EXCL). Each open is
  // closed once; the domain goes when the last is closed (EBUSY while SRQs or
  // target QPs use it and this is its last open).
  Result<Xrcd*> open_xrcd(uint64_t file_key, bool create, bool exclusive);
  std::error_code close_xrcd(Xrcd* xrcd);
  // Another handle on XRC target QP qpn of xrcd (ibv_open_qp): destroy_qp
  // closes one handle; the QP goes with the last (EINVAL: no such target QP in
  // that domain).
  Result<Qp*> open_qp(Xrcd* xrcd, uint32_t qpn);
  std::error_code destroy_srq(Srq* srq);
  Result<Ah*> create_ah(Pd* pd, const AhAttr& attr);
  std::error_code destroy_ah(Ah* ah);
  Result<Qp*> create_qp(Pd* pd, const QpInitAttr& attr);
  std::error_code destroy_qp(Qp* qp);  // EBUSY while attached to a multicast group

  // UD multicast (ibv_attach_mcast / ibv_detach_mcast; src/emu/mcast.cc). From
  // attach on, qp receives every UD datagram sent to the group, a multicast
  // GID (ff00::/8, or ::ffff:224.0.0.0/4 for an IPv4 group), with destination
  // QP 0xFFFFFF; the device joins the group on its network. EINVAL: not a UD
  // QP or not a multicast GID, or (detach) not attached; ENOMEM beyond the
  // limits of query_device (max_mcast_grp, max_mcast_qp_attach,
  // max_total_mcast_qp_attach); a transport error when the join fails.
  // Attaching twice is not an error (the second does nothing), as in uverbs.
  std::error_code attach_mcast(Qp* qp, const Gid& gid);
  std::error_code detach_mcast(Qp* qp, const Gid& gid);

  // Back to the state create() returned it in, on the same transport: every
  // object destroyed (handles into it dangle; its completion channels' fds are
  // closed), QPNs, R_Keys, PD handles and SRQ numbers counted from the start
  // again, counters zero, no deferred ACK, in-flight budget or unreachable
  // peer remembered, unsent frames dropped, multicast groups left, the GSI
  // client removed, and the async queue holding PORT_ACTIVE alone. What the
  // device was configured with stays (name, MTU, tap, event sink). The same
  // calls after a reset give the same QPNs and keys as on a new device: what
  // a fuzzer needs to run one input after another on one device.
  void reset();

  // Drives progress once without blocking: due timers, then received packets.
  // Returns the number of datagrams and timers processed.
  size_t progress();
  // The helper thread's kernel thread ID (/proc/self/task/<tid>: how often it
  // was woken, where it ran), once it has started; 0 before or without one.
  int helper_tid() const;
  // The transport (for wait(): the simulated fabric's clock advances there).
  Transport& transport();

  // QP 1 (emu/gsi.h). set_gsi_client installs the client that receives every
  // valid MAD to QP 1 (nullptr removes it; EBUSY when another client is
  // installed). Without a client, packets to QP 1 are dropped as for an
  // unknown QP. run_locked runs fn with the device lock held and sends what it
  // queued when it returns: how a client calls send_mad_locked and uses the
  // transport's timers from its own threads. send_mad_locked (lock held:
  // inside run_locked, GsiClient callbacks or Transport timer callbacks)
  // queues one 256-byte MAD from QP 1 to QP 1 at dst with the IP traffic
  // class tclass; EINVAL for another length.
  std::error_code set_gsi_client(GsiClient* client);
  void run_locked(const std::function<void()>& fn);
  std::error_code send_mad_locked(const wire::IpAddr& dst, std::span<const std::byte> mad,
                                  uint8_t tclass = 0);
  // The datagram send_mad_locked would send for the same arguments, without
  // sending it: IP and UDP headers (QP 1's source port), BTH, DETH, the MAD and
  // the ICRC, written to out (wire::kMaxFrameLen bytes suffice); its length.
  // For a MAD sent later by someone else (a process's farewell DREQ, sent
  // after it died: src/rdmacm_shim/reaper.h). Lock held, as send_mad_locked.
  wire::Result<size_t> mad_datagram_locked(const wire::IpAddr& dst, std::span<const std::byte> mad,
                                           uint8_t tclass, std::span<std::byte> out) const;

  void set_tap(PacketTap* tap);
  void set_event_sink(EventSink* sink);
  Counters counters() const;
  // Every object and counter as it is now (emu/snapshot.h), copied under the
  // device lock: for `rocelab stat`, never on the data path.
  DeviceSnapshot snapshot() const;

  class Engine;  // the implementation (src/emu/engine.h)
  Engine& engine() { return *engine_; }

 private:
  explicit Device(std::unique_ptr<Engine> e);
  std::unique_ptr<Engine> engine_;
};

}  // namespace rocelab::emu
