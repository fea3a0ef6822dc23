// The emulated devices: created once per process from the configuration,
// never freed (ibv_device pointers stay valid after ibv_free_device_list, as
// they do in libibverbs), and recognisable by address.
#pragma once
#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "verbs_shim/config.h"
#include "verbs_shim/device_runtime.h"

namespace rocelab::verbs_shim {

// libibverbs allocates a verbs_device (ibv_device first, then private fields,
// sizeof(ibv_device) + 48 bytes in rdma-core 44) and its own code may look
// past the ibv_device; ours sits in a zeroed block that covers that and more.
inline constexpr size_t kVerbsDeviceBlock = 1024;
static_assert(kVerbsDeviceBlock >= sizeof(ibv_device) + 48);

struct EmuDevice {
  union Abi {
    ibv_device ibdev;  // what programs see; must be first
    unsigned char block[kVerbsDeviceBlock];
  } abi{};
  uint32_t index = 0;  // ibv_get_device_index
  DeviceConfig cfg;
  DeviceRuntime runtime;
};

class DeviceTable {
 public:
  // The process-wide table, created on first use from the environment. A bad
  // configuration prints one line to stderr and yields no emulated devices.
  static DeviceTable& get() noexcept;

  std::span<EmuDevice> devices() noexcept { return {devices_.data(), count_}; }
  const ShimConfig& config() const noexcept { return config_; }

  // The emulated device behind `dev`, or nullptr for any other device.
  EmuDevice* find(const ibv_device* dev) noexcept;

 private:
  DeviceTable() noexcept;
  ShimConfig config_;
  std::array<EmuDevice, kMaxDevices> devices_{};
  size_t count_ = 0;
};

inline EmuDevice* emu_device(const ibv_device* dev) noexcept { return DeviceTable::get().find(dev); }
inline bool is_emu(const ibv_context* ctx) noexcept { return ctx && emu_device(ctx->device) != nullptr; }

// The node GUID of the device on `ip` (network order), known before the engine starts.
__be64 guid_for(const wire::IpAddr& ip) noexcept;

}  // namespace rocelab::verbs_shim
