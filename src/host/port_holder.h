// Who holds a UDP port on an address, for an error message that names it.
#pragma once
#include <cstdint>
#include <string>

#include "wire/ip_udp.h"

namespace rocelab::host {

// Read from /proc/net/udp{,6} and the processes' fds: "pid 123 (nc)", or a
// phrase saying who it could not name.
std::string describe_port_holder(const wire::IpAddr& addr, uint16_t port);

}  // namespace rocelab::host
