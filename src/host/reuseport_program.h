// The classic BPF program that steers the SO_REUSEPORT group of one address's
// UDP port 4791 (docs/host.md): each datagram goes to the socket of the
// process that owns its destination, decided by the kernel before the
// datagram is queued, so nothing passes through another process.
//
// The program reads the UDP payload (the kernel runs it from the byte after
// the UDP header) and returns the index of a socket in the group:
//   a probe (wire/host_probe.h)        the index written in it
//   DestQP 1 (a CM MAD on the GSI)     REQ, SIDR_REQ: the listener of its Service ID;
//                                      SIDR_REP: the top byte of its Request ID;
//                                      the others: the top byte of their remote
//                                      Communication ID, as a slot
//   any other DestQP                   its top byte, as a slot
// then the index of that slot's socket; anything else (a slot with no
// process, a service nobody listens on, a MAD of another class) goes to the
// default index. Each process allocates its QPNs (emu::DeviceConfig::qpn_block)
// and its CM's communication IDs with its slot as the top byte.
#pragma once
#include <linux/filter.h>

#include <cstdint>
#include <span>
#include <system_error>
#include <vector>

namespace rocelab::host {

// Where the packets of slot `slot` go: socket `index` of the group.
struct SlotRoute {
  uint8_t slot = 0;
  uint32_t index = 0;
};

// Where REQs and SIDR_REQs for service_id go.
struct ServiceRoute {
  uint64_t service_id = 0;
  uint32_t index = 0;
};

// The UDP payload offsets the program reads (BTH 12 + DETH 8, then the MAD:
// attribute ID at MAD byte 16, the CM message from byte 24).
inline constexpr uint32_t kMadOffset = 20;
inline constexpr uint32_t kMadAttrOffset = kMadOffset + 16;
inline constexpr uint32_t kCmFirstIdOffset = kMadOffset + 24;   // local comm ID / request ID
inline constexpr uint32_t kCmRemoteIdOffset = kMadOffset + 28;  // remote comm ID
inline constexpr uint32_t kCmServiceIdOffset = kMadOffset + 32; // REQ, SIDR_REQ

// At most this many services are steered (the program stays far below
// BPF_MAXINSNS); REQs for others go to the default index.
inline constexpr size_t kMaxServiceRoutes = 256;

std::vector<sock_filter> steering_program(std::span<const SlotRoute> slots,
                                          std::span<const ServiceRoute> services,
                                          uint32_t default_index);

// Attaches it to the group of socket fd (SO_ATTACH_REUSEPORT_CBPF: no
// privilege needed). The errno of setsockopt on failure.
std::error_code attach_steering(int fd, const std::vector<sock_filter>& program);

}  // namespace rocelab::host
