#include "verbs_shim/device_table.h"

#include <cstdio>
#include <cstring>
#include <functional>

namespace rocelab::verbs_shim {

DeviceTable& DeviceTable::get() noexcept {
  // Never destroyed: when one thread of a program calls exit() another may
  // still be inside a verb on an open device (rping's client: its CM thread
  // exits on REJECTED while main() deregisters its MRs). The engines stay;
  // DeviceRuntime::at_exit closes the record files.
  static DeviceTable* const table = new DeviceTable;
  return *table;
}

DeviceTable::DeviceTable() noexcept {
  std::string error;
  std::optional<ShimConfig> cfg = config_from_env(error);
  if (!cfg) {
    std::fprintf(stderr, "rocelab shim: %s; no emulated devices\n", error.c_str());
    return;
  }
  config_ = std::move(*cfg);
  count_ = config_.devices.size();
  for (size_t i = 0; i < count_; ++i) {
    EmuDevice& d = devices_[i];
    d.index = static_cast<uint32_t>(i);
    d.cfg = config_.devices[i];
    ibv_device& ib = d.abi.ibdev;
    // What rxe reports: an Ethernet (RoCE) port on an "InfiniBand CA" node.
    ib.node_type = IBV_NODE_CA;
    ib.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(ib.name, sizeof ib.name, "%s", d.cfg.name.c_str());
    std::snprintf(ib.dev_name, sizeof ib.dev_name, "uverbs-%s", d.cfg.name.c_str());
    // No sysfs entries exist: sysfs reads through these paths fail cleanly.
    std::snprintf(ib.dev_path, sizeof ib.dev_path, "/nonexistent/rocelab/%s", d.cfg.name.c_str());
    std::snprintf(ib.ibdev_path, sizeof ib.ibdev_path, "/nonexistent/rocelab/%s", d.cfg.name.c_str());
  }
}

EmuDevice* DeviceTable::find(const ibv_device* dev) noexcept {
  // Pointer identity: ours lie inside devices_. std::less gives a total order
  // over unrelated pointers.
  std::less<const void*> lt;
  const void* p = dev;
  if (lt(p, &devices_[0]) || !lt(p, &devices_[0] + count_)) return nullptr;
  for (size_t i = 0; i < count_; ++i) {
    if (&devices_[i].abi.ibdev == dev) return &devices_[i];
  }
  return nullptr;
}

__be64 guid_for(const wire::IpAddr& ip) noexcept {
  // What the engine reports as node_guid (emu::Device::node_guid): the EUI-64
  // of the address's MAC, as rxe derives it from its netdev. Big-endian, as
  // ibv_get_device_guid returns it.
  const auto mac = wire::mac_for(ip);
  const uint8_t b[8] = {static_cast<uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xFF, 0xFE,
                        mac[3], mac[4], mac[5]};
  __be64 out;
  std::memcpy(&out, b, sizeof out);
  return out;
}

}  // namespace rocelab::verbs_shim
