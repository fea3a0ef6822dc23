// Devices: rdma_get_devices and rdma_free_devices, the contexts the shim
// keeps open on the emulated devices (id->verbs).
#include "rdmacm_shim/exports.h"

#include <cerrno>
#include <cstdlib>

#include "rdmacm_shim/real_rdmacm.h"

using rocelab::rdmacm_shim::emulated;
using rocelab::rdmacm_shim::State;

extern "C" ibv_context** rdma_get_devices(int* num_devices) {
  if (!emulated()) {
    auto real = ROCELAB_REAL_CM(rdma_get_devices, V10);
    if (!real) {
      errno = ENOSYS;
      return nullptr;
    }
    return real(num_devices);
  }
  auto& devs = State::get().devs();
  auto** list = static_cast<ibv_context**>(std::calloc(devs.size() + 1, sizeof(ibv_context*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t k = 0; k < devs.size(); ++k) list[k] = devs[k].ctx;
  if (num_devices) *num_devices = static_cast<int>(devs.size());
  return list;
}

extern "C" void rdma_free_devices(ibv_context** list) {
  if (!emulated()) {
    if (auto real = ROCELAB_REAL_CM(rdma_free_devices, V10)) real(list);
    return;
  }
  std::free(list);
}
