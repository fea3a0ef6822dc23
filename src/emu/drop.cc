// Dropping a received packet: its counters (device and QP, by counter and by
// cause), a line on stderr for the first drops of a cause that points at a
// misconfiguration, and a packet-dropped event. Every layer of the receive
// path (recv.cc, responder.cc, gsi.cc, mcast.cc) drops through here.
#include <cstdio>
#include <iterator>
#include <string>
#include <tuple>

#include "emu/engine.h"

namespace rocelab::emu {

namespace {

// The drops that point at a misconfiguration, and what is likely wrong.
struct Cause {
  std::string_view reason, likely;
};
constexpr Cause kCauses[] = {
    {"bad ICRC", "the packet was damaged, or its sender computed the ICRC over other headers "
                 "(a middlebox rewriting them?)"},
    {"unknown QP", "no QP here has that number: destroyed, or the QPN was exchanged wrongly"},
    {"P_Key", "the peer uses a P_Key other than 0xFFFF (partitions are not emulated)"},
    {"Q_Key", "the UD sender's Q_Key differs from this QP's"},
    {"source address", "a connected QP takes packets only from the address of its path (AV): "
                       "the peer's GID was exchanged wrongly, or another host sends"},
    {"QP state", "the QP is not ready (not yet RTR/RTS, or already ERR/RESET): "
                 "did the peer start before this side brought its QP up?"},
    {"opcode of another transport", "the peer's QP type differs (RC and UC?)"},
    {"not our address", "sent to an address other than this device's"},
};
static_assert(std::size(kCauses) <= std::tuple_size_v<decltype(Device::Engine::warned)>);
constexpr uint8_t kWarnLines = 3;

}  // namespace

void Device::Engine::drop(QpImpl* qp, const Datagram& d, std::string_view reason,
                          uint64_t Counters::*ctr) {
  if (ctr) {
    counters.*ctr += 1;
    if (qp) qp->ctr.*ctr += 1;
  }
  for (size_t i = 0; i < kDropCauseCount; ++i) {
    if (kDropCauses[i].reason != reason) continue;
    counters.drops[i] += 1;
    if (qp) qp->ctr.drops[i] += 1;
    break;
  }
  if (cfg.warn) {
    for (size_t i = 0; i < std::size(kCauses); ++i) {
      if (kCauses[i].reason != reason || warned[i] > kWarnLines) continue;
      std::string line = cfg.name + ": dropped a packet from " + d.ip.src.to_string();
      if (d.payload.size() >= wire::kBthLen) {
        wire::BthView b(d.payload.data());
        char qpn[16];
        std::snprintf(qpn, sizeof qpn, "0x%06x", b.dest_qpn().value());
        line += " (" + std::string(wire::op_info(b.opcode()).name) + " to QP " + qpn + ")";
      }
      line += ": " + std::string(reason) + " — " + std::string(kCauses[i].likely);
      if (warned[i] == kWarnLines)
        line = cfg.name + ": further drops (" + std::string(reason) +
               ") are not shown; they are counted (rocelab run --counters)";
      ++warned[i];
      cfg.warn(line);
    }
  }
  if (logging()) {
    EngineEvent e;
    e.kind = EventKind::kPacketDropped;
    e.qpn = qp ? qp->qpn : 0;
    e.length = static_cast<uint32_t>(d.payload.size());
    if (d.payload.size() >= wire::kBthLen) {
      wire::BthView b(d.payload.data());
      e.bth_opcode = b.opcode();
      e.psn = b.psn().value();
      e.dest_qpn = b.dest_qpn().value();
    }
    e.reason = reason;
    log(e);
  }
}

}  // namespace rocelab::emu
