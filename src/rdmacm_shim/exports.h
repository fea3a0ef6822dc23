// What the files of the exported rdma_* calls (exports_*.cc, one per family
// of calls) share: librdmacm's return convention, the Cm behind the shim, and
// the helpers more than one of them calls, each defined in the file of its
// family. Together they are the librdmacm ABI (RDMACM_1.0-1.3, rdmacm.map) for
// emulated devices, over src/cm. The shim plays librdmacm (cma.c): it owns the
// rdma_cm_id and event structs, moves QPs with the attributes init_qp_attr
// gives (ucma_modify_qp_rtr/rts), turns CONNECT_RESPONSE into ESTABLISHED for
// ids with a QP, and makes ids without a channel synchronous (ucma_complete).
// The Cm plays the kernel. In a process without emulated devices every call
// goes to the real librdmacm unchanged. docs/rdma-cm.md says what is supported.
#pragma once
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/socket.h>

#include <cerrno>
#include <system_error>

#include "cm/rdma_cm.h"
#include "rdmacm_shim/shim.h"

// The version nodes of rdmacm.map, for ROCELAB_REAL_CM / ROCELAB_FORWARD.
#define V10 "RDMACM_1.0"
#define V11 "RDMACM_1.1"
#define V12 "RDMACM_1.2"
#define V13 "RDMACM_1.3"

namespace rocelab::rdmacm_shim {

inline bool emulated() noexcept { return State::get().emulated(); }
inline cm::Cm& the_cm() noexcept { return State::get().cm(); }

// librdmacm's convention: -1 with errno.
inline int fail(int e) noexcept {
  errno = e;
  return -1;
}
inline int result(std::error_code ec) noexcept { return ec ? fail(ec.value()) : 0; }

inline bool is_ud(const rdma_cm_id* id) noexcept { return id->qp_type == IBV_QPT_UD; }

// Event channels and events (exports_channels.cc).
Channel* new_channel() noexcept;
// The Channel struct itself is never freed: a thread of the program may call
// rdma_get_cm_event on it after another thread destroyed it (rping's
// cm_thread between two events), and then gets EBADF, as from read() on
// librdmacm's closed fd, instead of reading freed memory.
int free_channel(Channel* c) noexcept;
// rdma_get_cm_event: the Cm's next event as librdmacm reports it.
int get_event(rdma_event_channel* channel, rdma_cm_event** event) noexcept;

// Ids (exports_ids.cc). A new Id on channel c (nullptr: synchronous, with a
// channel of its own); nullptr with *err set when it cannot be made.
Id* new_id(Channel* c, void* context, rdma_port_space ps, ibv_qp_type qpt, int* err) noexcept;

// Addresses (exports_addresses.cc). to_sock returns 0 or an errno value.
int to_sock(const sockaddr* sa, cm::SockAddr* out) noexcept;
// The id's public fields from the Cm's view of it (what ucma_query_addr /
// ucma_query_route / ucma_query_gid fill in librdmacm).
void refresh(Id* i) noexcept;

// Connections (exports_connections.cc): the id's QP moved as librdmacm moves it.
// ucma_modify_qp_rtr + rts (INIT first: "update QP attributes from default values").
int modify_qp_rtr_rts(Id* i) noexcept;
void modify_qp_err(Id* i) noexcept;

// Synchronous endpoints (exports_endpoints.cc). ucma_complete: a synchronous
// id waits for the event its call causes.
int complete(Id* i) noexcept;

}  // namespace rocelab::rdmacm_shim
