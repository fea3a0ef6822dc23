// Exported verbs on devices and contexts. Each one serves emulated devices
// itself and hands everything else to the real libibverbs unchanged.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "verbs_shim/device_table.h"
#include "verbs_shim/emulated.h"
#include "verbs_shim/real_verbs.h"
#include "verbs_shim/shim_objects.h"
#include "verbs_shim/sibling.h"

// verbs.h routes these names through inline wrappers; we define the exported
// functions themselves.
#undef ibv_get_device_list
#undef ibv_query_port

// Private to libibverbs (driver.h), exported at IBVERBS_PRIVATE_34; ibv_devinfo
// and perftest call it. *type: 0 = "IB/RoCE v1", 1 = "RoCE v2" (sysfs names).
extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                  int* type) noexcept;

using rocelab::verbs_shim::DeviceTable;
using rocelab::verbs_shim::EmuDevice;
using rocelab::verbs_shim::ShimContext;
using rocelab::verbs_shim::emu_device;
using rocelab::verbs_shim::is_emu;
namespace emulated = rocelab::verbs_shim::emulated;

namespace {
constexpr const char* k10 = "IBVERBS_1.0";
constexpr const char* k11 = "IBVERBS_1.1";

// Set while this thread runs a real libibverbs function that lists devices
// itself: the real ibv_import_device calls ibv_get_device_list, which binds to
// ours, and then reads every entry as a kernel device (its sysfs node): an
// emulated entry there would crash it (SIGSEGV). Inside such a call the list is the real
// one alone, freed by the real library.
thread_local int real_list_only = 0;
struct RealListOnly {
  RealListOnly() { ++real_list_only; }
  ~RealListOnly() { --real_list_only; }
  RealListOnly(const RealListOnly&) = delete;
  RealListOnly& operator=(const RealListOnly&) = delete;
};
}  // namespace

// The merged list: emulated devices first (so programs that take the first
// device get rocelab0), then the real ones. The slot before the returned
// array holds the real list, which ibv_free_device_list hands back.
extern "C" ibv_device** ibv_get_device_list(int* num_devices) noexcept {
  if (real_list_only) {
    if (auto real = ROCELAB_REAL(ibv_get_device_list, k11)) return real(num_devices);
    errno = ENOSYS;
    return nullptr;
  }
  auto devices = DeviceTable::get().devices();
  ibv_device** real_list = nullptr;
  int n_real = 0;
  if (auto real = ROCELAB_REAL(ibv_get_device_list, k11)) {
    int saved = errno;
    real_list = real(&n_real);
    if (!real_list) n_real = 0;  // ENOSYS without an RDMA kernel: no real devices
    errno = saved;
  }
  size_t n = devices.size() + static_cast<size_t>(n_real);
  auto* block = static_cast<ibv_device**>(std::calloc(n + 2, sizeof(ibv_device*)));
  if (!block) {
    if (real_list) ROCELAB_REAL(ibv_free_device_list, k11)(real_list);
    errno = ENOMEM;
    return nullptr;
  }
  block[0] = reinterpret_cast<ibv_device*>(real_list);
  ibv_device** list = block + 1;
  size_t i = 0;
  for (EmuDevice& d : devices) list[i++] = &d.abi.ibdev;
  for (int r = 0; r < n_real; ++r) list[i++] = real_list[r];
  list[i] = nullptr;
  if (num_devices) *num_devices = static_cast<int>(n);
  return list;
}

extern "C" void ibv_free_device_list(ibv_device** list) noexcept {
  if (!list) return;
  if (real_list_only) {
    if (auto real = ROCELAB_REAL(ibv_free_device_list, k11)) real(list);
    return;
  }
  ibv_device** block = list - 1;
  auto* real_list = reinterpret_cast<ibv_device**>(block[0]);
  if (real_list) {
    if (auto real = ROCELAB_REAL(ibv_free_device_list, k11)) real(real_list);
  }
  std::free(block);
}

extern "C" const char* ibv_get_device_name(ibv_device* device) noexcept {
  if (emu_device(device)) return device->name;
  return ROCELAB_REAL(ibv_get_device_name, k11)(device);
}

extern "C" __be64 ibv_get_device_guid(ibv_device* device) noexcept {
  if (EmuDevice* d = emu_device(device)) return emulated::device_guid(*d);
  return ROCELAB_REAL(ibv_get_device_guid, k11)(device);
}

extern "C" int ibv_get_device_index(ibv_device* device) noexcept {
  if (EmuDevice* d = emu_device(device)) return static_cast<int>(d->index);
  if (auto real = ROCELAB_REAL(ibv_get_device_index, "IBVERBS_1.9")) return real(device);
  return -1;
}

extern "C" ibv_context* ibv_open_device(ibv_device* device) noexcept {
  if (EmuDevice* d = emu_device(device)) return emulated::open_device(*d);
  return ROCELAB_REAL(ibv_open_device, k11)(device);
}

// A dup of an emulated context's cmd_fd gives a second context sharing its
// objects (emu_import.cc); any other fd is the real libibverbs' business.
extern "C" ibv_context* ibv_import_device(int cmd_fd) noexcept {
  if (ShimContext* origin = emulated::context_of_fd(cmd_fd)) return emulated::import_device(origin, cmd_fd);
  if (auto real = ROCELAB_REAL(ibv_import_device, "IBVERBS_1.10")) {
    RealListOnly guard;
    return real(cmd_fd);
  }
  errno = EOPNOTSUPP;
  return nullptr;
}

extern "C" int ibv_close_device(ibv_context* context) noexcept {
  if (is_emu(context)) return emulated::close_device(context);
  return ROCELAB_REAL(ibv_close_device, k11)(context);
}

extern "C" int ibv_get_async_event(ibv_context* context, ibv_async_event* event) noexcept {
  if (is_emu(context)) return emulated::get_async_event(context, event);
  return ROCELAB_REAL(ibv_get_async_event, k11)(context, event);
}

extern "C" void ibv_ack_async_event(ibv_async_event* event) noexcept {
  // The event names its object; the object names its context.
  ibv_context* ctx = nullptr;
  switch (emulated::event_element(event->event_type)) {
    case emulated::EventElement::kCq: ctx = event->element.cq->context; break;
    case emulated::EventElement::kQp: ctx = event->element.qp->context; break;
    case emulated::EventElement::kSrq: ctx = event->element.srq->context; break;
    case emulated::EventElement::kWq: ctx = event->element.wq->context; break;
    case emulated::EventElement::kPortOrDevice: break;  // nothing to count acks on: libibverbs does nothing either
  }
  if (ctx && is_emu(ctx)) return emulated::ack_async_event(event);
  ROCELAB_REAL(ibv_ack_async_event, k11)(event);
}

extern "C" int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) noexcept {
  if (is_emu(context)) return emulated::query_device(context, device_attr);
  return ROCELAB_REAL(ibv_query_device, k11)(context, device_attr);
}

// The compat entry point: ___ibv_query_port calls it only for contexts without
// the query_port op (ours have it), and old binaries pass the shorter
// _compat_ibv_port_attr, which ends before port_cap_flags2.
extern "C" int ibv_query_port(ibv_context* context, uint8_t port_num,
                              _compat_ibv_port_attr* port_attr) noexcept {
  if (is_emu(context)) {
    ibv_port_attr full{};
    int rc = emulated::query_port(context, port_num, &full, sizeof full);
    if (rc == 0) std::memcpy(port_attr, &full, offsetof(ibv_port_attr, port_cap_flags2));
    return rc;
  }
  return ROCELAB_REAL(ibv_query_port, k11)(context, port_num, port_attr);
}

extern "C" int ibv_query_gid(ibv_context* context, uint8_t port_num, int index,
                             ibv_gid* gid) noexcept {
  if (is_emu(context)) return emulated::query_gid(context, port_num, index, gid);
  return ROCELAB_REAL(ibv_query_gid, k11)(context, port_num, index, gid);
}

extern "C" int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                 ibv_gid_entry* entry, uint32_t flags, size_t entry_size) noexcept {
  if (is_emu(context))
    return emulated::query_gid_ex(context, port_num, gid_index, entry, flags, entry_size);
  if (auto real = ROCELAB_REAL(_ibv_query_gid_ex, "IBVERBS_1.11"))
    return real(context, port_num, gid_index, entry, flags, entry_size);
  return EOPNOTSUPP;
}

extern "C" ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries,
                                        size_t max_entries, uint32_t flags,
                                        size_t entry_size) noexcept {
  if (is_emu(context))
    return emulated::query_gid_table(context, entries, max_entries, flags, entry_size);
  if (auto real = ROCELAB_REAL(_ibv_query_gid_table, "IBVERBS_1.11"))
    return real(context, entries, max_entries, flags, entry_size);
  return -EOPNOTSUPP;
}

extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                  int* type) noexcept {
  if (is_emu(context)) return emulated::query_gid_type(context, port_num, index, type);
  if (auto real = ROCELAB_REAL(ibv_query_gid_type, "IBVERBS_PRIVATE_34"))
    return real(context, port_num, index, type);
  errno = EOPNOTSUPP;
  return -1;
}

extern "C" int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index,
                              __be16* pkey) noexcept {
  if (is_emu(context)) return emulated::query_pkey(context, port_num, index, pkey);
  return ROCELAB_REAL(ibv_query_pkey, k11)(context, port_num, index, pkey);
}

extern "C" int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) noexcept {
  if (is_emu(context)) return emulated::get_pkey_index(context, port_num, pkey);
  if (auto real = ROCELAB_REAL(ibv_get_pkey_index, "IBVERBS_1.5")) return real(context, port_num, pkey);
  return -EOPNOTSUPP;
}

extern "C" ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) noexcept {
  if (is_emu(context)) return emulated::create_comp_channel(context);
  return ROCELAB_REAL(ibv_create_comp_channel, k10)(context);
}

extern "C" int ibv_destroy_comp_channel(ibv_comp_channel* channel) noexcept {
  if (is_emu(channel->context)) return emulated::destroy_comp_channel(channel);
  return ROCELAB_REAL(ibv_destroy_comp_channel, k10)(channel);
}

// The sibling interface (sibling.h): the engine behind an emulated context.
extern "C" void* rocelab_verbs_engine(ibv_context* ctx) noexcept {
  if (!is_emu(ctx)) return nullptr;
  return rocelab::verbs_shim::shim(ctx)->engine;
}

extern "C" int rocelab_verbs_service_taken(void* engine, uint64_t service_id) noexcept {
  if (engine == nullptr) return 0;
  return rocelab::verbs_shim::DeviceRuntime::service_taken(static_cast<const rocelab::emu::Device*>(engine),
                                                          service_id)
             ? 1
             : 0;
}

extern "C" void rocelab_verbs_set_services(void* engine, const uint64_t* service_ids,
                                           size_t n) noexcept {
  if (engine == nullptr) return;
  if (service_ids == nullptr) n = 0;
  try {
    std::vector<uint64_t> ids(service_ids, service_ids + n);
    rocelab::verbs_shim::DeviceRuntime::set_services(
        static_cast<const rocelab::emu::Device*>(engine), std::move(ids));
  } catch (const std::bad_alloc&) {
    // The group keeps the list it had: REQs for the new services reach the owner.
  }
}
