// Placeholder: the API of rdma_cm.h with every call failing ENOSYS, so that
// src/rdmacm_shim can compile and link against the API while the protocol is
// written (issue #10). Replaced by the implementation.
#include "cm/rdma_cm.h"

#include <cerrno>

namespace rocelab::cm {
namespace {
std::error_code nosys() { return {ENOSYS, std::generic_category()}; }
}  // namespace

class Cm::Impl {};

Cm::Cm(CmConfig) : impl_(std::make_unique<Impl>()) {}
Cm::~Cm() = default;
std::error_code Cm::add_device(emu::Device&) { return nosys(); }
std::error_code Cm::remove_device(emu::Device&) { return nosys(); }
emu::Device* Cm::device_for(const wire::IpAddr&) const { return nullptr; }
Result<ChannelHandle> Cm::create_channel() { return nosys(); }
std::error_code Cm::destroy_channel(ChannelHandle) { return nosys(); }
int Cm::channel_fd(ChannelHandle) const { return -1; }
std::error_code Cm::get_event(ChannelHandle, Event*) { return nosys(); }
Result<IdHandle> Cm::create_id(ChannelHandle, PortSpace, emu::QpType, void*) { return nosys(); }
std::error_code Cm::destroy_id(IdHandle) { return nosys(); }
std::error_code Cm::migrate_id(IdHandle, ChannelHandle) { return nosys(); }
std::error_code Cm::set_context(IdHandle, void*) { return nosys(); }
Result<IdInfo> Cm::query(IdHandle) const { return nosys(); }
std::error_code Cm::set_tos(IdHandle, uint8_t) { return nosys(); }
std::error_code Cm::set_ack_timeout(IdHandle, uint8_t) { return nosys(); }
std::error_code Cm::set_reuseaddr(IdHandle, bool) { return nosys(); }
std::error_code Cm::set_afonly(IdHandle, bool) { return nosys(); }
std::error_code Cm::bind(IdHandle, const SockAddr&) { return nosys(); }
std::error_code Cm::resolve_addr(IdHandle, const std::optional<SockAddr>&, const SockAddr&, int) {
  return nosys();
}
std::error_code Cm::resolve_route(IdHandle, int) { return nosys(); }
std::error_code Cm::listen(IdHandle, int) { return nosys(); }
std::error_code Cm::accept(IdHandle, const ConnParam&) { return nosys(); }
std::error_code Cm::reject(IdHandle, std::span<const uint8_t>) { return nosys(); }
std::error_code Cm::connect(IdHandle, const ConnParam&) { return nosys(); }
std::error_code Cm::establish(IdHandle) { return nosys(); }
std::error_code Cm::notify(IdHandle, emu::EventType) { return nosys(); }
std::error_code Cm::disconnect(IdHandle) { return nosys(); }
std::error_code Cm::init_qp_attr(IdHandle, emu::QpState, emu::QpAttr*, uint32_t*) const {
  return nosys();
}
std::error_code Cm::join_multicast(IdHandle, const SockAddr&, void*) { return nosys(); }
std::error_code Cm::leave_multicast(IdHandle, const SockAddr&) { return nosys(); }
Cm::Stats Cm::stats() const { return {}; }

}  // namespace rocelab::cm
