#include "host/reuseport_program.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "wire/cm_mad.h"
#include "wire/host_probe.h"

namespace rocelab::host {
namespace {

sock_filter stmt(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter jeq(uint32_t k, uint8_t jt, uint8_t jf) {
  return BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, jt, jf);
}
uint32_t attr(wire::CmAttr a) { return static_cast<uint32_t>(a); }

}  // namespace

std::vector<sock_filter> steering_program(std::span<const SlotRoute> slots,
                                          std::span<const ServiceRoute> services,
                                          uint32_t default_index) {
  services = services.first(std::min(services.size(), kMaxServiceRoutes));
  std::vector<sock_filter> p;
  // Jumps forward by more than 255 instructions need BPF_JA: they are
  // written once the target is known (fixups).
  std::vector<size_t> to_destqp, to_chain;

  // A probe: the index it carries.
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, 0));
  p.push_back(jeq(wire::kHostProbeMagic, 0, 2));
  p.push_back(stmt(BPF_LD | BPF_B | BPF_ABS, wire::kHostProbeIndexOffset));
  p.push_back(stmt(BPF_RET | BPF_A, 0));
  // DestQP 1: a MAD for the GSI. Anything else: by DestQP.
  p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, 4));
  p.push_back(stmt(BPF_ALU | BPF_AND | BPF_K, 0x00FFFFFF));
  p.push_back(jeq(1, 1, 0));
  to_destqp.push_back(p.size());
  p.push_back(stmt(BPF_JMP | BPF_JA, 0));

  // The MAD's attribute: REQ and SIDR_REQ by Service ID ...
  p.push_back(stmt(BPF_LD | BPF_H | BPF_ABS, kMadAttrOffset));
  p.push_back(jeq(attr(wire::CmAttr::kReq), 2, 0));
  p.push_back(jeq(attr(wire::CmAttr::kSidrReq), 1, 0));
  const size_t to_ids = p.size();
  p.push_back(stmt(BPF_JMP | BPF_JA, 0));
  for (const ServiceRoute& s : services) {
    p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, kCmServiceIdOffset));
    p.push_back(jeq(static_cast<uint32_t>(s.service_id >> 32), 0, 3));
    p.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, kCmServiceIdOffset + 4));
    p.push_back(jeq(static_cast<uint32_t>(s.service_id), 0, 1));
    p.push_back(stmt(BPF_RET | BPF_K, s.index));
  }
  p.push_back(stmt(BPF_RET | BPF_K, default_index));
  // ... SIDR_REP by its Request ID, the rest by the remote Communication ID
  // (the receiver's own), each by its top byte.
  p[to_ids].k = static_cast<uint32_t>(p.size() - to_ids - 1);
  p.push_back(jeq(attr(wire::CmAttr::kSidrRep), 0, 2));
  p.push_back(stmt(BPF_LD | BPF_B | BPF_ABS, kCmFirstIdOffset));
  to_chain.push_back(p.size());
  p.push_back(stmt(BPF_JMP | BPF_JA, 0));
  p.push_back(stmt(BPF_LD | BPF_B | BPF_ABS, kCmRemoteIdOffset));
  to_chain.push_back(p.size());
  p.push_back(stmt(BPF_JMP | BPF_JA, 0));

  // DestQP's top byte (byte 5 of the BTH).
  for (size_t at : to_destqp) p[at].k = static_cast<uint32_t>(p.size() - at - 1);
  p.push_back(stmt(BPF_LD | BPF_B | BPF_ABS, 5));
  // The slots.
  for (size_t at : to_chain) p[at].k = static_cast<uint32_t>(p.size() - at - 1);
  for (const SlotRoute& r : slots) {
    p.push_back(jeq(r.slot, 0, 1));
    p.push_back(stmt(BPF_RET | BPF_K, r.index));
  }
  p.push_back(stmt(BPF_RET | BPF_K, default_index));
  return p;
}

std::error_code attach_steering(int fd, const std::vector<sock_filter>& program) {
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.size());
  prog.filter = const_cast<sock_filter*>(program.data());
  if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) != 0)
    return {errno, std::system_category()};
  return {};
}

}  // namespace rocelab::host
