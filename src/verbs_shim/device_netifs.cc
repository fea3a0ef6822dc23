// The emulated devices' entries for getifaddrs (device_netifs.h).
#include "verbs_shim/device_netifs.h"

#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "emu/transport/link_mtu.h"
#include "verbs_shim/device_table.h"

namespace rocelab::verbs_shim {
namespace {

// Whether an up, non-loopback interface of `list` has `addr` assigned.
bool held_by_interface(const ifaddrs* list, const wire::IpAddr& addr) {
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    const sa_family_t family = i->ifa_addr->sa_family;
    if (family == AF_INET && !addr.v6 &&
        std::memcmp(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, addr.b.data(), 4) == 0)
      return true;
    if (family == AF_INET6 && addr.v6 &&
        std::memcmp(reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr.s6_addr, addr.b.data(), 16) == 0)
      return true;
  }
  return false;
}

}  // namespace

std::vector<DeviceNetif> device_netifs(const ifaddrs* real) {
  std::vector<DeviceNetif> out;
  DeviceTable& table = DeviceTable::get();
  for (EmuDevice& d : table.devices()) {
    auto addr = d.runtime.address(d.cfg, table.config());
    if (!addr || held_by_interface(real, *addr)) continue;
    auto netdev = emu::netdev_of(*addr);
    if (!netdev) continue;  // on no interface: nothing to list it under
    bool listed = false;    // two devices on one address: one entry
    for (const DeviceNetif& n : out) listed = listed || n.addr == *addr;
    if (!listed) out.push_back({netdev->name, *addr});
  }
  return out;
}

}  // namespace rocelab::verbs_shim
