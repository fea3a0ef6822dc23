// The network interface under an address and its MTU: what a real RoCE port
// is bound to (Soft-RoCE's netdev: the GID's ndev, rxe_set_mtu on its MTU).
#pragma once

#include <cstdint>
#include <string>

#include "wire/error.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {

struct Netdev {
  std::string name;      // "lo", "veth0", ...
  uint32_t ifindex = 0;  // if_nametoindex(name)
};

// The local interface that has `addr` assigned, or else the loopback
// interface in whose network it lies (127.0.0.x: lo); ENODEV when no
// interface has it, or the errno of the lookup.
wire::Result<Netdev> netdev_of(const wire::IpAddr& addr);

// The MTU (bytes) of the local interface that has `addr` assigned, or else of
// the loopback interface in whose network it lies (127.0.0.x: lo);
// ENODEV when no interface has it, or the errno of the lookup.
wire::Result<uint32_t> link_mtu(const wire::IpAddr& addr);

}  // namespace rocelab::emu
