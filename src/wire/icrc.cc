#include "wire/icrc.h"

#include <isa-l/crc.h>
#include <zlib.h>

#include <array>
#include <climits>
#include <cstdint>
#include <cstring>

#include "wire/opcode_table.h"
#include "wire/ip_udp.h"

namespace rocelab::wire {
namespace {

// CRC-32 (Ethernet polynomial, reflected, zlib's chaining convention) with
// ISA-L's carry-less-multiply code: zlib's crc32 costs ~50 ns a call before
// its first byte, and an ICRC takes three calls (docs/performance.md).
uint32_t crc_add(uint32_t crc, const std::byte* p, size_t n) {
  return crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(p), n);
}

uint32_t crc_seed() {
  // The CRC state after 8 bytes of 0xFF: the masked LRH of a native IB packet.
  static const uint32_t seed = [] {
    const std::byte ones[8] = {std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF},
                               std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF}};
    return crc_add(0, ones, 8);
  }();
  return seed;
}

}  // namespace

IcrcAccumulator::IcrcAccumulator(const std::byte* ip_udp, size_t ip_hlen, const std::byte* bth) {
  // Largest masked prefix: IPv4 with 40 bytes of options + UDP + BTH = 80 bytes.
  std::byte buf[60 + kUdpHeaderLen + kBthLen];
  const size_t n = ip_hlen + kUdpHeaderLen;
  std::memcpy(buf, ip_udp, n);
  const std::byte ff{0xFF};
  const uint8_t version = static_cast<uint8_t>(buf[0]) >> 4;
  if (version == 4) {
    buf[1] = ff;                  // TOS
    buf[8] = ff;                  // TTL
    buf[10] = buf[11] = ff;       // header checksum
  } else {
    // version(4) | traffic class(8) | flow label(20): keep the version nibble.
    buf[0] = std::byte{0x6F};
    buf[1] = buf[2] = buf[3] = ff;
    buf[7] = ff;                  // hop limit
  }
  buf[ip_hlen + 6] = buf[ip_hlen + 7] = ff;  // UDP checksum
  std::memcpy(buf + n, bth, kBthLen);
  buf[n + 4] = ff;                // BTH FECN/BECN/reserved
  crc_ = crc_add(crc_seed(), buf, n + kBthLen);
}

void IcrcAccumulator::add(std::span<const std::byte> bytes) {
  crc_ = crc_add(crc_, bytes.data(), bytes.size());
}

namespace {

// The linear part of the CRC of one byte `v` followed by n zero bytes: what
// XOR-ing v into a message at a byte that n bytes follow does to its CRC.
uint32_t syndrome(uint8_t v, size_t n) {
  const Bytef one = v, zero = 0;
  const uLong lin = crc32(0, &one, 1) ^ crc32(0, &zero, 1);
  return static_cast<uint32_t>(crc32_combine(lin, 0, static_cast<z_off_t>(n)));
}

// How many packet lengths the per-thread caches (LengthCache) keep.
constexpr unsigned kLengthsKept = 4;

// A basis of the syndromes of the 17 unseen bits, reduced for elimination:
// row i has pivot bit pivot[i] (cleared in every other row); tag[i] says
// which unseen bits it combines (bits 0..15 the ID, bit 16 DF).
struct Basis {
  size_t rest_len = SIZE_MAX, ip_hlen = 0;
  int rows = 0;
  uint32_t vec[17] = {};
  uint32_t tag[17] = {};
  int pivot[17] = {};
};

Basis make_basis(size_t ip_hlen, size_t rest_len) {
  // Bytes that follow each unseen byte in the ICRC's input: the 8 bytes of
  // 0xFF come first, then the IPv4 header (ID at 4..5, flags at 6), UDP, BTH.
  const size_t total = 8 + ip_hlen + kUdpHeaderLen + kBthLen + rest_len;
  auto after = [&](size_t ip_offset) { return total - (8 + ip_offset) - 1; };
  Basis b;
  b.rest_len = rest_len;
  b.ip_hlen = ip_hlen;
  for (int bit = 0; bit < 17; ++bit) {
    uint32_t v;
    if (bit < 16) {
      // ID bit `bit` (host order): big-endian on the wire, high byte at offset 4.
      v = bit >= 8 ? syndrome(static_cast<uint8_t>(1u << (bit - 8)), after(4))
                   : syndrome(static_cast<uint8_t>(1u << bit), after(5));
    } else {
      v = syndrome(0x40, after(6));  // DF: bit 6 of byte 6
    }
    uint32_t t = 1u << bit;
    for (int r = 0; r < b.rows; ++r) {
      if (v & (1u << b.pivot[r])) {
        v ^= b.vec[r];
        t ^= b.tag[r];
      }
    }
    if (v == 0) continue;  // dependent (never for these lengths; kept for safety)
    const int p = __builtin_ctz(v);
    for (int r = 0; r < b.rows; ++r) {
      if (b.vec[r] & (1u << p)) {
        b.vec[r] ^= v;
        b.tag[r] ^= t;
      }
    }
    b.vec[b.rows] = v;
    b.tag[b.rows] = t;
    b.pivot[b.rows] = p;
    ++b.rows;
  }
  return b;
}

// The syndromes of the 16 IPv4 ID bits for one length (ipv4_id_icrc_delta).
struct IdSyndromes {
  size_t rest_len = SIZE_MAX, ip_hlen = 0;
  uint32_t bit[16] = {};
};

IdSyndromes make_id_syndromes(size_t ip_hlen, size_t rest_len) {
  const size_t total = 8 + ip_hlen + kUdpHeaderLen + kBthLen + rest_len;
  auto after = [&](size_t ip_offset) { return total - (8 + ip_offset) - 1; };
  IdSyndromes s;
  for (int b = 0; b < 16; ++b)
    s.bit[b] = b >= 8 ? syndrome(static_cast<uint8_t>(1u << (b - 8)), after(4))
                      : syndrome(static_cast<uint8_t>(1u << b), after(5));
  s.rest_len = rest_len;
  s.ip_hlen = ip_hlen;
  return s;
}

// What a thread computed for the last kLengthsKept (IP header, rest) lengths it
// saw, oldest replaced first. Entry has rest_len and ip_hlen; make() builds one.
template <typename Entry>
struct LengthCache {
  std::array<Entry, kLengthsKept> kept;
  unsigned replace = 0;
  template <typename Make>
  const Entry& get(size_t ip_hlen, size_t rest_len, Make make) {
    for (const Entry& k : kept)
      if (k.rest_len == rest_len && k.ip_hlen == ip_hlen) return k;
    Entry& slot = kept[replace++ % kLengthsKept];
    slot = make();
    return slot;
  }
};

}  // namespace

std::optional<Ipv4Unseen> solve_ipv4_unseen(uint32_t delta, size_t ip_hlen, size_t rest_len) {
  // Packets of one flow take a few lengths (a READ response First, Middles and
  // Last, or a WRITE First and the rest, alternate): with one basis kept, every
  // change of length rebuilt it, and the rebuilds were 15 % of the CPU of an
  // ib_read_bw run.
  thread_local LengthCache<Basis> cache;
  const Basis& basis = cache.get(ip_hlen, rest_len, [&] { return make_basis(ip_hlen, rest_len); });
  uint32_t tag = 0;
  for (int r = 0; r < basis.rows; ++r) {
    if (delta & (1u << basis.pivot[r])) {
      delta ^= basis.vec[r];
      tag ^= basis.tag[r];
    }
  }
  if (delta != 0) return std::nullopt;
  Ipv4Unseen u;
  u.id = static_cast<uint16_t>(tag & 0xFFFF);
  u.df = (tag >> 16) & 1;
  return u;
}

uint32_t ipv4_id_icrc_delta(uint16_t id, size_t ip_hlen, size_t rest_len) {
  thread_local LengthCache<IdSyndromes> cache;
  const IdSyndromes& s = cache.get(ip_hlen, rest_len, [&] { return make_id_syndromes(ip_hlen, rest_len); });
  uint32_t delta = 0;
  for (int b = 0; b < 16; ++b)
    if (id & (1u << b)) delta ^= s.bit[b];
  return delta;
}

uint32_t compute_icrc(std::span<const std::byte> ip_packet, size_t ip_hlen) {
  const size_t hdrs = ip_hlen + kUdpHeaderLen;
  IcrcAccumulator acc(ip_packet.data(), ip_hlen, ip_packet.data() + hdrs);
  const size_t rest_begin = hdrs + kBthLen;
  acc.add(ip_packet.subspan(rest_begin, ip_packet.size() - rest_begin - kIcrcLen));
  return acc.value();
}

uint32_t roce_icrc(const IpUdpInfo& ip, std::span<const std::byte> roce) {
  std::array<std::byte, kIpv6HeaderLen + kUdpHeaderLen> hdr{};
  write_ip_udp(hdr.data(), ip, roce.size());
  const size_t ip_hlen = ip.dst.v6 ? kIpv6HeaderLen : kIpv4HeaderLen;
  IcrcAccumulator acc(hdr.data(), ip_hlen, roce.data());
  acc.add(roce.subspan(kBthLen, roce.size() - kBthLen - kIcrcLen));
  return acc.value();
}

}  // namespace rocelab::wire
