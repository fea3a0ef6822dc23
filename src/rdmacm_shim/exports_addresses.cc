// Addresses and routes: rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route,
// rdma_get_src_port and rdma_get_dst_port; the conversion between sockaddrs
// and the Cm's addresses, and the id's public fields (refresh).
#include "rdmacm_shim/exports.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <optional>

#include "rdmacm_shim/real_rdmacm.h"

namespace rocelab::rdmacm_shim {
namespace {

void from_sock(const cm::SockAddr& a, sockaddr_storage* out) noexcept {
  std::memset(out, 0, sizeof *out);
  if (a.ip.v6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, a.ip.b.data(), 16);
    in6->sin6_port = htons(a.port);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, a.ip.b.data(), 4);
    in->sin_port = htons(a.port);
  }
}

}  // namespace

int to_sock(const sockaddr* sa, cm::SockAddr* out) noexcept {
  if (!sa) return EINVAL;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    out->ip = wire::IpAddr{};
    std::memcpy(out->ip.b.data(), &in->sin_addr, 4);
    out->port = ntohs(in->sin_port);
    return 0;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    out->ip = wire::IpAddr{};
    out->ip.v6 = true;
    std::memcpy(out->ip.b.data(), &in6->sin6_addr, 16);
    out->port = ntohs(in6->sin6_port);
    return 0;
  }
  return sa->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL;
}

void refresh(Id* i) noexcept {
  auto info = the_cm().query(i->h);
  if (!info.ok()) return;
  rdma_cm_id& id = i->id;
  Dev* d = info->device ? State::get().dev_of(info->device) : nullptr;
  if (d) id.verbs = d->ctx;
  id.port_num = info->port_num;
  id.ps = static_cast<rdma_port_space>(info->ps);
  from_sock(info->src, &id.route.addr.src_storage);
  from_sock(info->dst, &id.route.addr.dst_storage);
  std::memcpy(id.route.addr.addr.ibaddr.sgid.raw, info->sgid.data(), 16);
  std::memcpy(id.route.addr.addr.ibaddr.dgid.raw, info->dgid.data(), 16);
  id.route.addr.addr.ibaddr.pkey = htons(info->pkey);
  if (info->num_paths > 0) {
    ibv_sa_path_rec& p = i->path;
    std::memcpy(p.sgid.raw, info->sgid.data(), 16);
    std::memcpy(p.dgid.raw, info->dgid.data(), 16);
    p.dlid = p.slid = htons(0xFFFF);  // permissive: RoCE has no LIDs
    p.hop_limit = info->hop_limit;
    p.traffic_class = info->traffic_class;
    p.reversible = htonl(0x80000000);
    p.numb_path = 1;
    p.pkey = htons(info->pkey);
    p.mtu_selector = 2;  // exactly
    p.mtu = static_cast<uint8_t>(info->path_mtu);
    p.rate_selector = 2;
    p.packet_life_time_selector = 2;
    p.packet_life_time = info->packet_life_time;
    id.route.path_rec = &p;
    id.route.num_paths = 1;
  } else {
    id.route.path_rec = nullptr;
    id.route.num_paths = 0;
  }
}

}  // namespace rocelab::rdmacm_shim

using rocelab::rdmacm_shim::complete;
using rocelab::rdmacm_shim::emulated;
using rocelab::rdmacm_shim::fail;
using rocelab::rdmacm_shim::Id;
using rocelab::rdmacm_shim::id_of;
using rocelab::rdmacm_shim::refresh;
using rocelab::rdmacm_shim::the_cm;
using rocelab::rdmacm_shim::to_sock;
namespace cm = rocelab::cm;

extern "C" int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (!emulated()) ROCELAB_FORWARD(rdma_bind_addr, V10, -1, id, addr);
  if (!id) return fail(EINVAL);
  cm::SockAddr a;
  if (int e = to_sock(addr, &a)) return fail(e);
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().bind(i->h, a)) return fail(ec.value());
  refresh(i);
  return 0;
}

extern "C" int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  if (!emulated()) ROCELAB_FORWARD(rdma_resolve_addr, V10, -1, id, src_addr, dst_addr, timeout_ms);
  if (!id) return fail(EINVAL);
  cm::SockAddr dst;
  if (int e = to_sock(dst_addr, &dst)) return fail(e);
  std::optional<cm::SockAddr> src;
  if (src_addr && src_addr->sa_family != AF_UNSPEC) {
    cm::SockAddr s;
    if (int e = to_sock(src_addr, &s)) return fail(e);
    src = s;
  }
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().resolve_addr(i->h, src, dst, timeout_ms)) return fail(ec.value());
  refresh(i);
  return complete(i);
}

extern "C" int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  if (!emulated()) ROCELAB_FORWARD(rdma_resolve_route, V10, -1, id, timeout_ms);
  if (!id) return fail(EINVAL);
  Id* i = id_of(id);
  if (std::error_code ec = the_cm().resolve_route(i->h, timeout_ms)) return fail(ec.value());
  refresh(i);
  return complete(i);
}

extern "C" __be16 rdma_get_src_port(rdma_cm_id* id) {
  if (!emulated()) {
    auto real = ROCELAB_REAL_CM(rdma_get_src_port, V10);
    return real ? real(id) : 0;
  }
  if (!id) return 0;
  const sockaddr* sa = &id->route.addr.src_addr;
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  return 0;
}

extern "C" __be16 rdma_get_dst_port(rdma_cm_id* id) {
  if (!emulated()) {
    auto real = ROCELAB_REAL_CM(rdma_get_dst_port, V10);
    return real ? real(id) : 0;
  }
  if (!id) return 0;
  const sockaddr* sa = &id->route.addr.dst_addr;
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  return 0;
}
