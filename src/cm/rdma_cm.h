// rdma_cm for emulated devices: the part of the kernel's rdma_cm + ib_cm +
// ucma that librdmacm talks to, as a C++ library (rocelab_cm). One Cm object
// per process serves every emulated device the process has; src/rdmacm_shim
// puts librdmacm's ABI on top of it (struct rdma_cm_id, rdma_event_channel,
// rdma_cm_event). See docs/rdma-cm.md for the design and the wire.
//
// The split is librdmacm's own: this library is "the kernel" (ids, port
// spaces, listen tables, address and route resolution, the IB CM state
// machine, SIDR, MADs on QP 1, the event queue); the shim is "librdmacm" (it
// creates and modifies QPs with the attributes init_qp_attr gives, exactly as
// librdmacm's ucma_modify_qp_rtr/rts do, and calls establish() after moving an
// active side's QP to RTS). This library never touches a program's QP.
//
// Getting from the verbs shim to a Device. The Cm needs, per emulated
// device: the emu::Device (its address is Device::address(), which is what
// bind/resolve match against) and nothing else. The rdmacm shim gets it from
// src/verbs_shim: DeviceTable::get().devices() lists the emulated devices with
// their configured address (DeviceRuntime::address); DeviceRuntime::acquire
// starts the engine. The usual path: at its first call the shim opens an
// ibv_context on each emulated device (ibv_open_device through the verbs
// shim, which acquires the engine: rdma_cm_id.verbs needs that context anyway,
// and librdmacm too keeps one open per device for the life of the library),
// then calls Cm::add_device(device) for each; add_device installs the Cm as
// the device's GSI client (QP 1). Before the context is closed (library
// unload, or never), remove_device(). The emu::Device behind an emulated
// ibv_context is ShimContext::engine (verbs_shim/shim_objects.h: an emulated
// context is a ShimContext whose verbs_context ends in the ibv_context;
// verbs_shim::is_emu(ctx) tells which contexts are). This library only needs
// the reference; how the two shims share it is the rdmacm shim's business.
//
// Threads and locks. Every method is thread-safe and non-blocking (no call
// waits for the network). Work that reacts to the network (received MADs,
// retransmit timers) runs inside the device's progress: on the device's helper
// thread on UDP, or inside Device::progress() / the testbed's step() on the
// simulated fabric, which is what makes simulated CM runs deterministic. Events
// are queued on the id's channel; the channel's fd (an eventfd) is readable
// while events are queued. Lock order: a device's lock, then the Cm's lock; the
// Cm never calls into a device while holding its own lock except the GSI calls
// made for it under the device lock (emu/gsi.h). The caller must not call a Cm
// method from a PacketTap or EventSink (they run under the device lock).
//
// Errors: methods return std::error_code with the errno that librdmacm's call
// gives for the same misuse (EINVAL bad state or argument, EADDRINUSE,
// EADDRNOTAVAIL, ENODEV, EAGAIN no event, EBUSY, ENOENT unknown handle,
// ENOMEM, EAFNOSUPPORT, ENOTSUP). An id or channel handle the Cm does not
// know (never created, or destroyed): ENOENT.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <system_error>

#include "cm/types.h"
#include "emu/device.h"
#include "wire/error.h"

namespace rocelab::cm {

using wire::Result;

// How an unbound id finds a route to a destination (the kernel's
// rdma_resolve_ip: route lookup, then neighbour resolution).
enum class RouteVerdict : uint8_t {
  kReachable,     // ADDR_RESOLVED
  kHostUnreach,   // ADDR_ERROR, status -EHOSTUNREACH
  kNetUnreach,    // ADDR_ERROR, status -ENETUNREACH
};

struct CmConfig {
  // The IB CM timeouts and retries, as the kernel's rdma_cm sets them
  // (cma.c): CMA_CM_RESPONSE_TIMEOUT 20 (4.096 us * 2^20 = 4.3 s; the REQ's
  // remote and local CM response timeouts), CMA_MAX_CM_RETRIES 15. Tests on
  // the simulated fabric keep them; tests on UDP may shorten them.
  uint8_t cm_response_timeout = 20;
  uint8_t max_cm_retries = 15;
  // The packet life time of the route (RoCE: CMA_IBOE_PACKET_LIFETIME 18,
  // 4.096 us * 2^18 = 1.07 s), from which the REQ's local ACK timeout comes
  // (cm_ack_timeout with the device's ACK delay 15: 19, as in the Soft-RoCE
  // captures) and which the MAD timeouts add twice.
  uint8_t packet_life_time = 18;
  // The MRA's service timeout when an id needs more time (CMA_CM_MRA_SETTING:
  // 24, 68 s): sent on a duplicate REQ while the application has not yet
  // accepted.
  uint8_t mra_service_timeout = 24;
  // Who answers "can this device reach dst". Empty: the default in addr.h
  // (a route lookup by the kernel for real-interface and loopback
  // addresses: connect() of a UDP socket, which sends nothing; every address
  // is reachable on the simulated fabric). Called without any lock held.
  std::function<RouteVerdict(const emu::Device& from, const wire::IpAddr& dst)> route;
  // The seed of the comm IDs, TIDs, starting PSNs and ephemeral ports. 0:
  // from std::random_device (as the kernel's get_random_u32). Tests on the
  // simulated fabric set it for reproducible captures.
  uint64_t seed = 0;
  // A process's last word (src/rdmacm_shim/reaper.h). While a connection is
  // established, farewell(local comm ID, datagram) holds the DREQ its end
  // would send (the UDP payload with the IP and UDP headers before it, as
  // emu::Device::mad_datagram_locked builds it), and farewell(id, {})
  // withdraws it when the connection leaves that state. Whoever holds them
  // sends them if the process dies without closing its connections, as the
  // kernel's CM sends a DREQ for each established connection of a process
  // that exits, however it exits. Called with the device lock held: it must
  // only copy. Empty: no one keeps them.
  std::function<void(uint32_t local_comm_id, std::span<const std::byte> datagram)> farewell;
  // Told, for each device, the Service IDs this Cm listens on there (its
  // listeners bound to the device's address or to the wildcard) whenever
  // they change: where several processes share an address, REQs are steered
  // to the one listening (src/host/address_group.h). Called with no lock
  // held, from the thread that listened or destroyed the listener.
  std::function<void(emu::Device& dev, std::vector<uint64_t> service_ids)> on_listens;
  // Whether another process at dev's address listens on service_id already:
  // then listen() is EADDRINUSE, as the kernel's CM refuses a second
  // listener on a port of one host. Called with no lock held. Empty: only
  // this Cm's own listeners count.
  std::function<bool(emu::Device& dev, uint64_t service_id)> listened_elsewhere;
};

class Cm {
 public:
  explicit Cm(CmConfig cfg = {});
  // Destroys every id (as destroy_id) and leaves every device (remove_device).
  ~Cm();
  Cm(const Cm&) = delete;
  Cm& operator=(const Cm&) = delete;

  // ---- Devices ----

  // Makes dev's address (Device::address()) an rdma_cm address of this Cm and
  // installs the Cm as dev's GSI client: from now on dev's QP 1 accepts MADs
  // and the Cm answers them (REQ to an unknown service: REJ 8). dev must stay
  // alive until remove_device(dev) or ~Cm. EEXIST when added already; EBUSY
  // when the device already has another GSI client.
  std::error_code add_device(emu::Device& dev);
  // Ids bound to dev get kDeviceRemoval (as rdma_cm on hot-unplug), their
  // timers stop, and dev's GSI client is removed. Their connections end as
  // the kernel's CM ends them when the process holding the ids exits: an
  // established one sends a DREQ (once: nobody is left to resend it), a
  // connecting one a REJ, an answer owed to a DREQ its DREP; so the peer
  // learns of it (DISCONNECTED, REJECTED). ENOENT when not added.
  std::error_code remove_device(emu::Device& dev);
  // The device whose address is ip, or nullptr.
  emu::Device* device_for(const wire::IpAddr& ip) const;

  // ---- Event channels (rdma_create_event_channel) ----

  Result<ChannelHandle> create_channel();
  // EBUSY while ids use it (librdmacm: destroy the ids first).
  std::error_code destroy_channel(ChannelHandle ch);
  // An eventfd (EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC) whose counter is
  // the number of queued events: poll()/epoll report it readable while an
  // event is queued. Owned by the Cm (closed by destroy_channel); do not read
  // it: get_event does. -1 for an unknown channel.
  int channel_fd(ChannelHandle ch) const;
  // Takes the oldest event of the channel without blocking: EAGAIN when
  // none is queued (the shim blocks with poll() on channel_fd when the
  // program's channel is blocking), ENOENT for an unknown channel. Events of
  // an id that was destroyed after they were queued are dropped, never returned.
  std::error_code get_event(ChannelHandle ch, Event* out);

  // ---- Ids (rdma_create_id, rdma_destroy_id, rdma_migrate_id) ----

  // An id on channel ch for port space ps and QP type qp_type (rdma_create_id
  // derives it: TCP/IB/IPOIB -> RC, UDP -> UD; rdma_create_id2 / create_ep may
  // give UC, or UD on RDMA_PS_IB). EINVAL for an unknown channel or a QP type
  // the port space does not allow (UDP needs UD; TCP needs RC or UC).
  Result<IdHandle> create_id(ChannelHandle ch, PortSpace ps, emu::QpType qp_type,
                             void* context = nullptr);
  // Destroys an id: a connected one sends a DREQ first (not waiting for the
  // DREP: the peer's CM answers it into timewait), one in kConnectRequest sends
  // a REJ (reason 28, consumer reject) as the kernel does, a listener stops
  // listening; pending connection requests of a listener that were not yet
  // taken by get_event are rejected (REJ 28) and their new ids destroyed. Its
  // queued events are dropped. ENOENT for an unknown id.
  std::error_code destroy_id(IdHandle id);
  // rdma_migrate_id: moves the id (and its queued events) to channel ch.
  std::error_code migrate_id(IdHandle id, ChannelHandle ch);
  // The pointer reported in events as id_context / listen_context (the
  // shim stores its struct rdma_cm_id* there: a new id from kConnectRequest
  // has none until the shim sets it).
  std::error_code set_context(IdHandle id, void* context);
  // Everything rdma_cm_id's public fields need; ENOENT for an unknown id.
  Result<IdInfo> query(IdHandle id) const;

  // rdma_set_option (RDMA_OPTION_ID level): TOS (traffic class of the route
  // and of every MAD: must be set before resolve_route to take effect, as in
  // the kernel), ACK_TIMEOUT (the RTS timeout init_qp_attr gives), REUSEADDR
  // and AFONLY (before bind; EINVAL after). EINVAL for a value out of range.
  std::error_code set_tos(IdHandle id, uint8_t tos);
  std::error_code set_ack_timeout(IdHandle id, uint8_t timeout);
  std::error_code set_reuseaddr(IdHandle id, bool on);
  std::error_code set_afonly(IdHandle id, bool on);

  // ---- Addresses and routes ----

  // rdma_bind_addr. addr.ip: the wildcard (any device; the id stays without a
  // device until it listens or resolves), the address of an added device, or
  // a loopback address (127.0.0.0/8, ::1) that no device has, bound without a
  // device (EADDRNOTAVAIL for any other: the shim passes addresses of real
  // RDMA devices to the real librdmacm before this). addr.port 0: the Cm picks a free one
  // (from 32768..60999, the kernel's ip_local_port_range, at random). A port
  // already bound in the same port space on an overlapping address (the same
  // address, or either wildcard) is EADDRINUSE unless both ids set REUSEADDR
  // and neither listens (the kernel's cma_check_port). EINVAL when the id is
  // already bound. An IPv6 wildcard with AFONLY off also serves IPv4.
  std::error_code bind(IdHandle id, const SockAddr& addr);
  // rdma_resolve_addr: binds the id when it is not (to src when src is given
  // and not the wildcard; otherwise to the device that reaches dst: the device
  // with dst's address when dst is local, else the first added device whose
  // route verdict for dst is kReachable) with an ephemeral port, then queues
  // kAddrResolved, or kAddrError with -EHOSTUNREACH / -ENETUNREACH as
  // CmConfig::route says. The event is queued from this call (the emulation
  // has no ARP: no MAD is sent and timeout_ms is not used); an address
  // nobody holds resolves, and the failure shows at connect: kUnreachable, as
  // soon as the network reports the address dead (ICMP port unreachable on
  // UDP), else after the REQ's retries. EINVAL when already resolving or
  // connected; EADDRNOTAVAIL for a src that is not ours; ENODEV when no
  // device is added.
  std::error_code resolve_addr(IdHandle id, const std::optional<SockAddr>& src,
                               const SockAddr& dst, int timeout_ms);
  // rdma_resolve_route: after kAddrResolved, fills the path (GIDs
  // ::ffff:a.b.c.d, MTU = the device's active MTU, hop limit 64, traffic class
  // = TOS, packet life time) and queues kRouteResolved (timeout_ms is not
  // used). EINVAL in any other state.
  std::error_code resolve_route(IdHandle id, int timeout_ms);

  // ---- Passive side ----

  // rdma_listen: an unbound id is bound to the wildcard address with an
  // ephemeral port first (as the kernel). backlog <= 0 means the default
  // (the kernel's: 1024 ... librdmacm passes it through); it limits the
  // connection requests queued on the channel and not yet taken by get_event
  // (more REQs are answered with REJ 28, as the kernel's ucma does when its
  // backlog is full: the new id is refused and destroyed). A REQ
  // (or SIDR_REQ) to this port space and port on a matching address creates a
  // new id (state kConnectRequest, on the listener's channel, with the
  // listener's port space, QP type and options, bound to the device the REQ came in on,
  // src/dst from the REQ's rdma_cm header, the route from the REQ's path) and
  // queues kConnectRequest on the LISTENER's channel with listen_id, the
  // new id, the REQ's conn params and its private data (56 bytes after the
  // rdma_cm header; UDP: 180 after it, ud.ah_attr towards the requester).
  // EINVAL when the id is connected or unbound after a failed bind, EADDRINUSE
  // when another id listens on the same port and address (in this Cm, or in
  // another process sharing the address: CmConfig::listened_elsewhere).
  std::error_code listen(IdHandle id, int backlog);
  // rdma_accept on a new id in kConnectRequest. Connected port spaces: sends
  // the REP (qp_num, starting PSN = this side's rq_psn, responder resources
  // and initiator depth from p, rnr retry, srq, flow control, p's private
  // data, at most 196 bytes: EINVAL beyond) and waits for the RTU: then
  // kEstablished (or at establish()/notify(COMM_EST) when data arrives first).
  // The REP is resent after the REQ's local CM response timeout up to
  // max_cm_retries times; then kUnreachable (-ETIMEDOUT) on this id. The shim
  // moves the QP to RTR and RTS with init_qp_attr before calling this (as
  // librdmacm's rdma_accept does). UDP: sends the SIDR_REP (status 0, p.qp_num,
  // Q_Key RDMA_UDP_QKEY 0x01234567, private data up to 136 bytes); no event
  // follows. EINVAL in another state.
  std::error_code accept(IdHandle id, const ConnParam& p);
  // rdma_reject on an id in kConnectRequest: REJ reason 28 (consumer reject)
  // with the private data (at most 148 bytes), or for UDP a SIDR_REP status 2
  // (rejected, 136 bytes). The id stays (the application destroys it).
  std::error_code reject(IdHandle id, std::span<const uint8_t> private_data);

  // ---- Active side ----

  // rdma_connect after kRouteResolved. Connected port spaces: sends a REQ
  // (service ID (ps << 16) | dst port, rdma_cm header with src/dst address and
  // the id's source port, up to 56 bytes of p's private data: EINVAL beyond;
  // local QPN p.qp_num, starting PSN drawn at random = this side's rq_psn,
  // responder resources / initiator depth / retry / rnr retry / srq / flow
  // control from p, path MTU of the route, CM response timeouts and max CM
  // retries from CmConfig, the primary path from the route) and arms the
  // retransmit timer. Then one of: kConnectResponse (REP received: the shim
  // moves the QP to RTR/RTS and calls establish(), which sends the RTU; the
  // shim reports ESTABLISHED to the program as librdmacm does, or leaves
  // CONNECT_RESPONSE to a program without a QP), kRejected (status = REJ
  // reason, REJ's private data), kUnreachable (-ETIMEDOUT: no answer after
  // max_cm_retries resends, or the network reported the peer address dead).
  // (kConnectError is never queued: in the kernel it reports a failure to
  // modify a kernel-owned QP, and here the shim owns every QP.) UDP: sends a SIDR_REQ (180 bytes of private data at most);
  // then kEstablished with ud.qp_num / ud.qkey / ud.ah_attr, or kUnreachable.
  // EINVAL in another state.
  std::error_code connect(IdHandle id, const ConnParam& p);
  // rdma_establish (active side after kConnectResponse): sends the RTU; the
  // id is kEstablished (no further event: the shim reports ESTABLISHED from
  // kConnectResponse). On a passive id in kAccepted it is notify(COMM_EST).
  // EINVAL in another state.
  std::error_code establish(IdHandle id);
  // rdma_notify(id, IBV_EVENT_COMM_EST): data arrived on the passive side's QP
  // before the RTU: the id becomes established and kEstablished is queued, as
  // if the RTU had come (a late RTU is then ignored). Other events: 0, no effect
  // (the kernel ignores them too). EINVAL when the id has no connection.
  std::error_code notify(IdHandle id, emu::EventType event);

  // rdma_disconnect, as the kernel's: on an established id sends a DREQ
  // (resent after 2 x packet life time + the CM response timeout, up to
  // max_cm_retries); kDisconnected is queued on this id when the DREP comes
  // (status 0) or the retries run out (status -ETIMEDOUT). The peer gets
  // kDisconnected when the DREQ arrives, and its CM answers with the DREP when
  // its application calls disconnect (or destroy_id), as the kernel's does: a
  // DREQ does not answer itself. On an id that received a DREQ: sends the DREP
  // (no further event). Crossed DREQs: a DREQ that arrives while ours is
  // outstanding is answered with a DREP at once, and ours ends there too
  // (one kDisconnected per side). Then timewait (kTimewaitExit is not
  // reported: librdmacm programs never see it), after which the comm ID may
  // be reused; a DREQ that arrives in timewait gets a DREP again. On an id
  // still connecting (kConnect, kConnectResponse, kAccepted): the connection
  // is abandoned with a REJ (reason 28 when we are passive; the peer gets
  // kRejected) and kDisconnected is not queued. Returns 0 in all those cases
  // (the kernel's rdma_disconnect does too); EINVAL when the id never
  // connected (no REQ sent or received).
  std::error_code disconnect(IdHandle id);

  // ---- QP attributes (rdma_init_qp_attr) ----

  // The attributes and mask for moving the id's QP to `state` (kInit, kRtr,
  // kRts), exactly as the kernel's rdma_init_qp_attr / ib_cm_init_qp_attr:
  // INIT: pkey_index 0, port_num 1, qp_access_flags (RC: REMOTE_WRITE, plus
  //       REMOTE_READ | REMOTE_ATOMIC when responder resources > 0) | UD: qkey
  //       (RDMA_UDP_QKEY).
  // RTR (connected): ah_attr (is_global, dgid = the peer's GID, sgid_index 0,
  //       hop_limit, traffic_class, port_num 1), path_mtu, dest_qp_num (the
  //       peer's QPN from the REQ/REP), rq_psn (this side's starting PSN: the
  //       one it put in its REQ/REP), RC: max_dest_rd_atomic (responder
  //       resources), min_rnr_timer 0 (the kernel's cm_init_qp_rtr_attr).
  //       librdmacm then overrides max_dest_rd_atomic / max_rd_atomic with the
  //       application's values unless they are RDMA_MAX_RESP_RES /
  //       RDMA_MAX_INIT_DEPTH (ucma_modify_qp_rtr/rts): the shim's job.
  // RTS: sq_psn (the peer's starting PSN from its REQ/REP), RC: timeout (the
  //       local ACK timeout of the path, or ACK_TIMEOUT), retry_cnt,
  //       rnr_retry_cnt (from the REQ/REP), max_rd_atomic (initiator depth);
  //       UD: sq_psn 0.
  // Which side's PSNs: the active side's rq_psn = its REQ's starting PSN =
  // the passive side's sq_psn, and symmetrically with the REP. EINVAL before
  // the connection parameters are known (RTR/RTS before the REQ/REP) or for
  // another state.
  std::error_code init_qp_attr(IdHandle id, emu::QpState state, emu::QpAttr* attr,
                               uint32_t* mask) const;

  // ---- Multicast (rdma_join_multicast) on a UDP id ----

  // Queues kMulticastJoin with ud.ah_attr.dgid = the group's GID (an IPv4
  // group a.b.c.d maps to ::ffff:a.b.c.d as the kernel's RoCE
  // cma_iboe_set_mgid), ud.qp_num 0xFFFFFF, ud.qkey RDMA_UDP_QKEY; the shim
  // attaches the QP (ibv_attach_mcast). No MAD is sent (RoCE has no SA).
  // The event carries the group and context (Event::mc_group, mc_context).
  // EINVAL for a non-multicast address or an id that is not UD or has no
  // device; EADDRINUSE for a group the id has joined already.
  std::error_code join_multicast(IdHandle id, const SockAddr& group, void* context);
  // EADDRNOTAVAIL for a group the id has not joined (librdmacm's errno).
  std::error_code leave_multicast(IdHandle id, const SockAddr& group);

  // ---- Statistics ----
  struct Stats {
    uint64_t mads_sent = 0, mads_received = 0, mads_resent = 0, mads_dropped = 0,
             duplicates = 0, rej_sent = 0;
  };
  Stats stats() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rocelab::cm
