// MADs on RoCEv2: the General Services Interface is QP 1 of every port. A MAD
// travels as the payload of a UD SEND Only (opcode 0x64) to QP 1:
//   BTH: P_Key 0xFFFF (default partition), DestQP 1, the sending QP 1's PSN,
//        AckReq set (Soft-RoCE sets it on the last packet of every message, UD
//        included: its CM MADs in ../shared/traces/public/montybeatnik_*.pcap
//        carry it; a UD receiver ignores it)
//   DETH: Q_Key 0x80010000 (the well-known GSI Q_Key), SrcQP 1
//   payload: the 256-byte MAD (no pad: 256 is a multiple of 4)
// That is what the kernel's MAD layer (ib_mad, through the device's GSI QP)
// sends for its CM, and what Wireshark dissects as MADs.
#pragma once
#include <cstddef>
#include <span>

#include "wire/cm_mad.h"
#include "wire/error.h"
#include "wire/frame.h"
#include "wire/packet.h"

namespace rocelab::wire {


// (kGsiQpn, QP 1, is in psn.h.)
// BTH and DETH of a MAD from QP 1 to QP 1 with the given PSN, as Soft-RoCE sends them.
RoceHeaders gsi_headers(Psn psn);

// The whole frame (Ethernet when with_ethernet, IP, UDP, BTH, DETH, MAD,
// ICRC) carrying a CM MAD; returns its length. Errors: those of encode_cm_mad
// and build_frame.
Result<size_t> build_cm_frame(std::span<std::byte> out, const IpUdpInfo& ip, Psn psn,
                              const CmMad& mad, bool with_ethernet = true);

// True when a decoded packet is a MAD to the GSI: UD SEND Only to QP 1 with a
// payload of 256 bytes. (The caller then reads it with parse_mad_header /
// parse_cm_mad.)
bool is_gsi_mad(const RocePacket& p);
// True for every UD SEND Only to QP 1, whatever its length: what a reader
// should show as a MAD, or as a broken one (is_gsi_mad() false).
bool is_to_gsi(const RocePacket& p);

}  // namespace rocelab::wire
