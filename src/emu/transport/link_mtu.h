// The MTU of the network interface that holds an address: what a real RoCE
// port derives its active MTU from (Soft-RoCE: rxe_set_mtu on the netdev's MTU).
#pragma once

#include <cstdint>

#include "wire/error.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {

// The MTU (bytes) of the local interface that has `addr` assigned, or else of
// the loopback interface in whose network it lies (127.0.0.x: lo);
// ENODEV when no interface has it, or the errno of the lookup.
wire::Result<uint32_t> link_mtu(const wire::IpAddr& addr);

}  // namespace rocelab::emu
