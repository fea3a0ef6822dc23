// The emulated devices as network interfaces: what getifaddrs adds for them.
//
// A NIC's RoCE port has its IP address on a network interface (rxe's netdev),
// and some frameworks find their RDMA devices only that way: libfabric's verbs
// provider takes each address of each up, non-loopback interface, binds an
// rdma_cm id to it and keeps the device the id lands on. An emulated device's
// address between network namespaces is on a veth, and getifaddrs lists it;
// its default address, 127.0.0.x, lies in lo's network but on no interface a
// program may use for RDMA (lo is a loopback interface, and lo lists only
// 127.0.0.1). For such a device the shim's getifaddrs (libc_ifaddrs.cc) adds
// one entry: the interface under the address (lo, as the GID's netdev in
// sysfs says), the address with a host mask, up and running, and not marked
// loopback: the address belongs to the emulated NIC.
#pragma once
#include <ifaddrs.h>

#include <string>
#include <vector>

#include "wire/ip_udp.h"

namespace rocelab::verbs_shim {

struct DeviceNetif {
  std::string name;  // the interface under the address ("lo")
  wire::IpAddr addr;
};

// The entries to add to `real` (libc's list): one per emulated device whose
// address (found, or bound now, as the device's sysfs files find it) no up,
// non-loopback interface of `real` holds, and which lies on an interface.
std::vector<DeviceNetif> device_netifs(const ifaddrs* real);

}  // namespace rocelab::verbs_shim
