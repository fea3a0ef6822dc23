// Fuzz target: the engine's receive path (src/emu recv.cc, responder.cc,
// completer.cc) against live QPs of every type and state — the victim of
// victim.h, built once and reset before each input. After each input: no byte outside
// what the victim registered for the peer to change has changed.
//
// A structure-aware mutator (LLVMFuzzerCustomMutator) keeps inputs in the
// record format of victim.h and, half the time, writes a plausible packet
// with rocelab's own encoder: an opcode of the QP's transport, the right QPN
// (the harness sets it), a PSN near the one expected, an R_Key that is valid
// (or stale, or of another PD, or guessed), addresses and lengths at, inside
// and beyond the MR's bounds and where 64-bit ranges wrap, aligned and
// misaligned atomics, ACKs/NAKs with plausible MSNs — so inputs get past the
// parser and the receive checks into the responder and the completer. The
// other half, libFuzzer's byte mutations on one packet, find what the encoder
// would never write.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "tests/fuzz/victim.h"
#include "wire/packet.h"

namespace {

using namespace rocelab;
using fuzz::Victim;

struct Known {
  std::vector<fuzz::QpInfo> qps;
  std::vector<fuzz::MrInfo> mrs;
  std::array<std::vector<uint8_t>, 5> opcodes;  // per wire::Transport
};

const Known& known() {
  static const Known k = [] {
    Known r;
    Victim v;  // what every run's victim looks like (the set-up is deterministic)
    r.qps = v.qps();
    r.mrs = v.mrs();
    for (int op = 0; op < 256; ++op) {
      const wire::OpInfo& info = wire::op_info(static_cast<uint8_t>(op));
      if (info.valid) r.opcodes[static_cast<size_t>(info.transport)].push_back(static_cast<uint8_t>(op));
    }
    return r;
  }();
  return k;
}

struct Rec {
  uint8_t kind = 0, qp = 0;
  std::vector<uint8_t> bytes;
};

std::vector<Rec> parse(const uint8_t* d, size_t n) {
  std::vector<Rec> out;
  size_t i = 0;
  while (n - i >= fuzz::kRecHeader) {
    Rec r;
    r.kind = d[i];
    r.qp = d[i + 1];
    size_t len = (size_t{d[i + 2]} << 8) | d[i + 3];
    i += fuzz::kRecHeader;
    if ((r.kind & 3) >= fuzz::kRecLocal) len = 0;
    len = std::min(len, n - i);
    r.bytes.assign(d + i, d + i + len);
    i += len;
    out.push_back(std::move(r));
  }
  return out;
}

size_t serialize(const std::vector<Rec>& recs, uint8_t* d, size_t max) {
  size_t i = 0;
  for (const Rec& r : recs) {
    const size_t len = (r.kind & 3) >= fuzz::kRecLocal ? 0 : std::min<size_t>(r.bytes.size(), 0xFFFF);
    if (i + fuzz::kRecHeader + len > max) break;
    d[i] = r.kind;
    d[i + 1] = r.qp;
    d[i + 2] = static_cast<uint8_t>(len >> 8);
    d[i + 3] = static_cast<uint8_t>(len);
    if (len != 0) std::memcpy(d + i + fuzz::kRecHeader, r.bytes.data(), len);
    i += fuzz::kRecHeader + len;
  }
  return i;
}

template <typename T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[rng() % v.size()];
}

// An address near the edges of an MR, or where a range wraps.
uint64_t plausible_va(std::mt19937_64& rng, const fuzz::MrInfo& mr) {
  switch (rng() % 8) {
    case 0: return mr.iova;
    case 1: return mr.iova + rng() % mr.length;
    case 2: return mr.iova + mr.length - 1 - rng() % 16;
    case 3: return mr.iova + mr.length + rng() % 16;
    case 4: return mr.iova - 1 - rng() % 16;
    case 5: return ~uint64_t{0} - rng() % 64;  // wraps past 2^64
    case 6: return mr.iova + (rng() % (mr.length / 8)) * 8;  // 8-aligned inside
    default: return rng();
  }
}

uint32_t plausible_len(std::mt19937_64& rng, const fuzz::MrInfo& mr) {
  switch (rng() % 6) {
    case 0: return 0;
    case 1: return 1 + static_cast<uint32_t>(rng() % 64);
    case 2: return mr.length;
    case 3: return mr.length + 1 + static_cast<uint32_t>(rng() % 16);
    case 4: return 0x80000000u + static_cast<uint32_t>(rng() % 16);
    default: return static_cast<uint32_t>(rng());
  }
}

uint32_t plausible_rkey(std::mt19937_64& rng, const Known& k) {
  if (rng() % 8 == 0) return static_cast<uint32_t>(rng());
  const uint32_t key = pick(rng, k.mrs).rkey;
  return rng() % 8 == 0 ? key ^ (1u << (rng() % 8)) : key;  // a neighbour's key byte
}

// A packet built with rocelab's encoder that the victim may well accept.
Rec plausible_packet(std::mt19937_64& rng) {
  const Known& k = known();
  Rec r;
  r.qp = static_cast<uint8_t>(rng() % k.qps.size());
  const fuzz::QpInfo& q = k.qps[r.qp];
  const auto t = q.type == emu::QpType::kRC ? wire::Transport::kRC
               : q.type == emu::QpType::kUC ? wire::Transport::kUC
                                            : wire::Transport::kUD;
  wire::RoceHeaders h;
  h.bth.opcode = pick(rng, k.opcodes[rng() % 16 == 0 ? rng() % 5 : static_cast<size_t>(t)]);
  h.bth.dest_qpn = wire::Qpn(q.qpn);
  switch (rng() % 4) {
    case 0: h.bth.psn = wire::Psn(static_cast<uint32_t>(rng() % 8)); break;
    case 1: h.bth.psn = wire::Psn(static_cast<uint32_t>(rng() % 40)); break;
    case 2: h.bth.psn = wire::Psn(0xFFFFFFu - static_cast<uint32_t>(rng() % 8)); break;
    default: h.bth.psn = wire::Psn(static_cast<uint32_t>(rng())); break;
  }
  h.bth.ack_req = rng() % 2;
  h.bth.se = rng() % 4 == 0;
  if (rng() % 32 == 0) h.bth.pkey = static_cast<uint16_t>(rng());
  const fuzz::MrInfo& mr = pick(rng, k.mrs);
  h.reth.rkey = plausible_rkey(rng, k);
  h.reth.va = plausible_va(rng, mr);
  h.reth.dma_len = plausible_len(rng, mr);
  h.atomic_eth.rkey = plausible_rkey(rng, k);
  h.atomic_eth.va = plausible_va(rng, mr) & (rng() % 4 == 0 ? ~uint64_t{0} : ~uint64_t{7});
  h.atomic_eth.swap_add = rng();
  h.atomic_eth.compare = rng() % 2 ? 0 : rng();
  static constexpr uint8_t kSyndromes[] = {0x1F, 0x00, 0x60, 0x61, 0x62, 0x63, 0x64, 0x20, 0x2E, 0x7F};
  h.aeth.syndrome = rng() % 8 ? kSyndromes[rng() % std::size(kSyndromes)] : static_cast<uint8_t>(rng());
  h.aeth.msn = static_cast<uint32_t>(rng() % 8);
  h.atomic_ack_eth.orig = rng();
  h.deth.qkey = rng() % 4 ? fuzz::kQkey : static_cast<uint32_t>(rng());
  h.deth.src_qpn = wire::Qpn(rng() % 2 ? fuzz::kPeerQpn : static_cast<uint32_t>(rng()));
  h.immdt.imm = static_cast<uint32_t>(rng());
  h.ieth.rkey = plausible_rkey(rng, k);
  static std::array<std::byte, wire::kMaxMtu> payload_src{};
  size_t plen = 0;
  switch (rng() % 5) {
    case 0: plen = 0; break;
    case 1: plen = 1 + rng() % 64; break;
    case 2: plen = 256; break;
    case 3: plen = 1024; break;
    default: plen = rng() % 1100; break;
  }
  for (size_t i = 0; i < plen; ++i) payload_src[i] = std::byte(static_cast<uint8_t>(rng()));
  std::vector<uint8_t> buf(wire::kMaxRoceLen);
  auto span = std::span<std::byte>(reinterpret_cast<std::byte*>(buf.data()), buf.size());
  auto n = wire::encode_roce(span, h, std::span<const std::byte>(payload_src.data(), plen));
  if (!n) n = wire::encode_roce(span, h, {});  // an opcode without payload
  if (!n) return r;
  buf.resize(*n);
  r.bytes = std::move(buf);
  // Mostly from the connected peer, as it should be.
  r.kind = static_cast<uint8_t>(fuzz::kRecPacket | (rng() % 8 == 0 ? (rng() % 4) << 4 : 0));
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)known();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Victim v;
  v.reset();
  v.run(std::span<const uint8_t>(data, size));
  v.check_memory();
  return 0;
}

// libFuzzer's own byte mutator, for use inside ours. The replay build (no
// libFuzzer) has a stand-in that flips one byte, so that replay_main can run
// the mutator over the seeds too.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);
#ifndef ROCELAB_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) {
  static uint32_t n = 0;
  if (size > 0 && size <= max_size) data[(n * 2654435761u) % size] ^= static_cast<uint8_t>(1u << (n % 8));
  ++n;
  return size;
}
#endif

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::mt19937_64 rng(seed);
  std::vector<Rec> recs = parse(data, size);
  const size_t op = recs.empty() ? 0 : rng() % 10;
  if (op <= 3) {  // a new plausible packet, inserted or replacing one
    Rec r = plausible_packet(rng);
    if (!recs.empty() && op == 3) {
      recs[rng() % recs.size()] = std::move(r);
    } else {
      recs.insert(recs.begin() + static_cast<long>(recs.empty() ? 0 : rng() % (recs.size() + 1)),
                  std::move(r));
    }
  } else if (op <= 6) {  // libFuzzer's byte mutations on one packet
    Rec& r = recs[rng() % recs.size()];
    const size_t cap = std::min<size_t>(max_size, 2048);
    const size_t orig = std::clamp<size_t>(r.bytes.size(), 1, cap);
    r.bytes.resize(cap);
    r.bytes.resize(LLVMFuzzerMutate(r.bytes.data(), orig, cap));
    if ((r.kind & 3) >= fuzz::kRecLocal) r.kind = fuzz::kRecPacket;
  } else if (op == 7) {  // the PSN (BTH bytes 9-11) one step from where it was
    Rec& r = recs[rng() % recs.size()];
    if (r.bytes.size() >= wire::kBthLen) {
      uint32_t psn = (uint32_t{r.bytes[9]} << 16) | (uint32_t{r.bytes[10]} << 8) | r.bytes[11];
      psn = (psn + (rng() % 2 ? 1 : 0xFFFFFF)) & 0xFFFFFF;
      r.bytes[9] = static_cast<uint8_t>(psn >> 16);
      r.bytes[10] = static_cast<uint8_t>(psn >> 8);
      r.bytes[11] = static_cast<uint8_t>(psn);
    }
  } else if (op == 8) {  // time passes, the victim acts, or a record is duplicated
    if (rng() % 4 == 0) {
      recs.insert(recs.begin() + static_cast<long>(rng() % (recs.size() + 1)),
                  Rec{fuzz::kRecLocal, static_cast<uint8_t>(rng()), {}});
    } else if (rng() % 2) {
      recs.insert(recs.begin() + static_cast<long>(rng() % (recs.size() + 1)),
                  Rec{fuzz::kRecTime, static_cast<uint8_t>(rng() % 32), {}});
    } else {
      const Rec copy = recs[rng() % recs.size()];
      recs.insert(recs.begin() + static_cast<long>(rng() % (recs.size() + 1)), copy);
    }
  } else {  // flags, QP index, or a record removed
    Rec& r = recs[rng() % recs.size()];
    switch (rng() % 3) {
      case 0: r.kind ^= static_cast<uint8_t>(1u << (rng() % 6)); break;
      case 1: r.qp = static_cast<uint8_t>(rng()); break;
      default: recs.erase(recs.begin() + static_cast<long>(rng() % recs.size())); break;
    }
  }
  return serialize(recs, data, max_size);
}
