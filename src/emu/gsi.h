// QP 1, the General Services Interface, of an emulated device: the hook a
// connection manager (src/cm) uses to receive and send MADs. The engine keeps
// no GSI state of its own beyond a PSN counter: it checks what arrives for QP
// 1 (ICRC, P_Key, then: a UD SEND Only with a 256-byte payload and the GSI
// Q_Key 0x80010000) and hands it to the one GsiClient; a client sends MADs as
// a kernel RoCEv2 peer does (wire/gsi.h: BTH P_Key 0xFFFF, DestQP 1, DETH
// Q_Key 0x80010000, SrcQP 1) through the device's normal transmit path, so
// they appear in the pcap tap and the event log like every packet.
//
// Locking: the client's callbacks run with the device lock held (inside
// progress: the helper thread on UDP, Device::progress on the simulated
// fabric). From there, from a Transport timer callback, or inside
// Device::run_locked, the client may call Device::send_mad_locked and use the
// device's Transport (make_timer, Timer::arm_at/cancel, now); it must not call
// any other Device method (they take the lock).
#pragma once
#include <cstdint>
#include <span>

#include "emu/transport/transport.h"
#include "wire/ip_udp.h"

namespace rocelab::emu {

// One MAD that arrived for QP 1.
struct GsiMad {
  wire::IpUdpInfo ip;              // the IP/UDP headers it came with (ip.src: the peer)
  uint32_t src_qp = 0;             // DETH SrcQP (1 from a CM peer)
  std::span<const std::byte> mad;  // the 256 bytes; valid only during the call
};

class GsiClient {
 public:
  virtual ~GsiClient() = default;
  // Device lock held (see above).
  virtual void on_mad(const GsiMad& m) = 0;
  // The network reported peer unreachable (ICMP port/host unreachable for a
  // datagram sent there: Transport::take_unreachable). Device lock held.
  virtual void on_unreachable(const wire::IpAddr& peer) { (void)peer; }
};

}  // namespace rocelab::emu
