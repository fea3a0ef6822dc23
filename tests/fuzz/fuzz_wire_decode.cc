// Fuzz target: the RoCEv2 decoder of src/wire (parse_roce, decode_frame over
// every link type it reads, native InfiniBand in ERF), IPv4 and IPv6.
//
// Input: one byte choosing what the rest is, then the bytes:
//   0: a UDP payload (BTH .. ICRC) for parse_roce
//   1: an Ethernet frame   2: raw IP   3: Linux SLL   4: Linux SLL2
//   5: an ERF record (native IB or Ethernet inside)
// Beyond "no crash, no sanitizer report", what decodes must re-encode to the
// same packet: encode(parse(x)) parses back to the same headers and payload,
// and encoding that again gives the same bytes (the decoder keeps every field
// the encoder writes).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "tests/fuzz/fuzz_check.h"
#include "wire/frame.h"
#include "wire/ib_native.h"
#include "wire/packet.h"

namespace {

using namespace rocelab::wire;

std::array<std::byte, kMaxRoceLen + 64> g_a, g_b;

void round_trip(const RocePacket& p) {
  auto n1 = encode_roce(g_a, p.hdr, p.payload);
  ROCELAB_FUZZ_CHECK(n1.ok(), "a decoded packet does not encode");
  auto q = parse_roce(std::span<const std::byte>(g_a.data(), *n1));
  ROCELAB_FUZZ_CHECK(q.ok(), "an encoded packet does not decode");
  ROCELAB_FUZZ_CHECK(q->payload.size() == p.payload.size() &&
                         (p.payload.empty() ||
                          std::memcmp(q->payload.data(), p.payload.data(), p.payload.size()) == 0),
                     "payload changed in the round trip");
  auto n2 = encode_roce(g_b, q->hdr, q->payload);
  ROCELAB_FUZZ_CHECK(n2.ok() && *n2 == *n1 && std::memcmp(g_a.data(), g_b.data(), *n1) == 0,
                     "encode(parse(encode(p))) != encode(p)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      if (auto p = parse_roce(in)) round_trip(*p);
      break;
    case 1:
    case 2:
    case 3:
    case 4: {
      static constexpr LinkType kLinks[] = {LinkType::kEthernet, LinkType::kRaw, LinkType::kLinuxSll,
                                            LinkType::kLinuxSll2};
      auto d = decode_frame(static_cast<int>(kLinks[data[0] % 6 - 1]), in);
      if (d) {
        round_trip(d->roce);
        // The views the decoder hands out lie inside the frame it was given.
        const std::byte* lo = in.data();
        const std::byte* hi = in.data() + in.size();
        ROCELAB_FUZZ_CHECK(d->ip.ip_packet.data() >= lo &&
                               d->ip.ip_packet.data() + d->ip.ip_packet.size() <= hi &&
                               d->ip.udp_payload.data() >= d->ip.ip_packet.data() &&
                               d->ip.udp_payload.data() + d->ip.udp_payload.size() <=
                                   d->ip.ip_packet.data() + d->ip.ip_packet.size(),
                           "decoded views outside the frame");
      }
      break;
    }
    case 5:
      if (auto rec = parse_erf(in)) {
        if (rec->type == kErfTypeInfiniband) {
          if (auto ib = decode_ib(rec->payload)) round_trip(ib->roce);
        } else {
          (void)decode_frame(static_cast<int>(LinkType::kEthernet), rec->payload);
        }
      }
      break;
  }
  return 0;
}
