// What rdma_cm (the kernel's drivers/infiniband/core/cma.c; librdmacm speaks
// the same) puts into the CM MADs for its IP port spaces:
//
// The Service ID of a REQ or SIDR_REQ names the port space and the port:
//   service_id = (port_space << 16) | port     (cma_get_service_id)
// port spaces (enum rdma_ucm_port_space): IPOIB 0x0002, TCP 0x0106,
// UDP 0x0111, IB 0x013F. So rping's default port 7174 over RDMA_PS_TCP is
// service ID 0x0000000001061C06. A Service ID under the IP prefix
// 0x0000000001xxxxxx is also how Wireshark knows to read the header below.
//
// The first 36 bytes of REQ (and SIDR_REQ) private data (struct cma_hdr):
//  byte 0      cma_version: 0x00
//  byte 1      ip_version in bits 7-4: 4 or 6
//  bytes 2-3   port: the active side's (source) port, network order
//  bytes 4-19  source address: IPv6, or 12 zero bytes and the IPv4 address
//  bytes 20-35 destination address: same
// The application's private data follows (92 - 36 = 56 bytes for REQ,
// 216 - 36 = 180 for SIDR_REQ). Other messages carry no rdma_cm header: their
// private data is the application's alone. RDMA_PS_IB with AF_IB addresses
// carries no header either (the service ID is the address).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "wire/error.h"
#include "wire/ip_udp.h"

namespace rocelab::wire {

namespace rdma_ps {
inline constexpr uint16_t kIpoib = 0x0002, kTcp = 0x0106, kUdp = 0x0111, kIb = 0x013F;
}

inline constexpr uint64_t kRdmaIpPsMask = 0xFFFFFFFFFFFF0000ull;  // RDMA_IB_IP_PS_MASK

constexpr uint64_t rdma_cm_service_id(uint16_t port_space, uint16_t port) {
  return (uint64_t{port_space} << 16) | port;
}
// The port space and port of an rdma_cm IP service ID; nullopt when the service
// ID is not one of the four port spaces (another CM user, e.g. SRP or iSER's IB CM).
struct RdmaCmService {
  uint16_t port_space = 0, port = 0;
  bool operator==(const RdmaCmService&) const = default;
};
std::optional<RdmaCmService> parse_rdma_cm_service_id(uint64_t service_id);
// "TCP", "UDP", "IB", "IPOIB", or "?".
const char* rdma_ps_name(uint16_t port_space);

inline constexpr size_t kCmaHdrLen = 36;
inline constexpr uint8_t kCmaVersion = 0x00;

struct CmaHdr {
  uint8_t cma_version = kCmaVersion;
  uint16_t port = 0;     // host order here; network order on the wire
  IpAddr src, dst;       // both IPv4 or both IPv6 (src.v6 decides)
  bool operator==(const CmaHdr&) const = default;
};

// Writes the 36 bytes into out. Errors: kBufferTooSmall, kBadCmaHdr (one
// address IPv4 and the other IPv6).
Result<size_t> encode_cma_hdr(std::span<std::byte> out, const CmaHdr& h);
// Reads the header at the start of private data. Errors: kTruncated (fewer
// than 36 bytes), kBadCmaHdr (cma_version not 0, IP version not 4 or 6).
Result<CmaHdr> parse_cma_hdr(std::span<const std::byte> private_data);

}  // namespace rocelab::wire
