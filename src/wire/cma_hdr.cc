#include "wire/cma_hdr.h"

#include <cstring>

#include "wire/byte_order.h"

namespace rocelab::wire {

std::optional<RdmaCmService> parse_rdma_cm_service_id(uint64_t service_id) {
  const auto ps = static_cast<uint16_t>(service_id >> 16);
  if ((service_id >> 32) != 0) return std::nullopt;
  switch (ps) {
    case rdma_ps::kIpoib:
    case rdma_ps::kTcp:
    case rdma_ps::kUdp:
    case rdma_ps::kIb: return RdmaCmService{ps, static_cast<uint16_t>(service_id)};
    default: return std::nullopt;
  }
}

const char* rdma_ps_name(uint16_t port_space) {
  switch (port_space) {
    case rdma_ps::kIpoib: return "IPOIB";
    case rdma_ps::kTcp: return "TCP";
    case rdma_ps::kUdp: return "UDP";
    case rdma_ps::kIb: return "IB";
    default: return "?";
  }
}

namespace {

// union cma_ip_addr: an in6_addr, or three zero words and the IPv4 address.
void put_addr(std::byte* p, const IpAddr& a) {
  std::memset(p, 0, 16);
  if (a.v6) {
    std::memcpy(p, a.b.data(), 16);
  } else {
    std::memcpy(p + 12, a.b.data(), 4);
  }
}

IpAddr get_addr(const std::byte* p, bool v6) {
  IpAddr a;
  a.v6 = v6;
  if (v6) {
    std::memcpy(a.b.data(), p, 16);
  } else {
    std::memcpy(a.b.data(), p + 12, 4);
  }
  return a;
}

}  // namespace

Result<size_t> encode_cma_hdr(std::span<std::byte> out, const CmaHdr& h) {
  if (out.size() < kCmaHdrLen) return WireErrc::kBufferTooSmall;
  if (h.src.v6 != h.dst.v6) return WireErrc::kBadCmaHdr;
  store8(out.data(), h.cma_version);
  store8(out.data() + 1, h.src.v6 ? 0x60 : 0x40);
  store_be16(out.data() + 2, h.port);
  put_addr(out.data() + 4, h.src);
  put_addr(out.data() + 20, h.dst);
  return kCmaHdrLen;
}

Result<CmaHdr> parse_cma_hdr(std::span<const std::byte> pd) {
  if (pd.size() < kCmaHdrLen) return WireErrc::kTruncated;
  CmaHdr h;
  h.cma_version = load8(pd.data());
  const uint8_t ipv = load8(pd.data() + 1) >> 4;
  if (h.cma_version != kCmaVersion || (ipv != 4 && ipv != 6)) return WireErrc::kBadCmaHdr;
  h.port = load_be16(pd.data() + 2);
  h.src = get_addr(pd.data() + 4, ipv == 6);
  h.dst = get_addr(pd.data() + 20, ipv == 6);
  return h;
}

}  // namespace rocelab::wire
