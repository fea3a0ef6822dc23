// Multicast: rdma_join_multicast(_ex) and rdma_leave_multicast. The Cm joins
// the group; the QP is attached when MULTICAST_JOIN is reported
// (exports_channels.cc) and detached here.
#include "rdmacm_shim/exports.h"

#include <cstring>

#include "rdmacm_shim/real_rdmacm.h"

using rocelab::rdmacm_shim::emulated;
using rocelab::rdmacm_shim::fail;
using rocelab::rdmacm_shim::id_of;
using rocelab::rdmacm_shim::result;
using rocelab::rdmacm_shim::the_cm;
using rocelab::rdmacm_shim::to_sock;
namespace cm = rocelab::cm;

extern "C" int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  if (!emulated()) ROCELAB_FORWARD(rdma_join_multicast, V10, -1, id, addr, context);
  if (!id) return fail(EINVAL);
  cm::SockAddr g;
  if (int e = to_sock(addr, &g)) return fail(e);
  return result(the_cm().join_multicast(id_of(id)->h, g, context));
}

extern "C" int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr, void* context) {
  if (!emulated()) ROCELAB_FORWARD(rdma_join_multicast_ex, V11, -1, id, mc_join_attr, context);
  if (!id || !mc_join_attr) return fail(EINVAL);
  if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return fail(EINVAL);
  if ((mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) &&
      mc_join_attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
      mc_join_attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
    return fail(EINVAL);
  }
  return rdma_join_multicast(id, mc_join_attr->addr, context);
}

extern "C" int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_leave_multicast, V10, -1, id, addr);
  if (!id) return fail(EINVAL);
  cm::SockAddr g;
  if (int e = to_sock(addr, &g)) return fail(e);
  if (std::error_code ec = the_cm().leave_multicast(id_of(id)->h, g)) return fail(ec.value());
  if (id->qp) {
    ibv_gid mgid;
    auto gid = g.ip.gid();
    std::memcpy(mgid.raw, gid.data(), 16);
    (void)ibv_detach_mcast(id->qp, &mgid, 0);
  }
  return 0;
}
