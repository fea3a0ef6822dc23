// Datagrams for the host tests: a RoCEv2 payload as the shared port receives it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "wire/bth.h"

namespace rocelab::host::packets {

// BTH (RC SEND Only to DestQP qpn), a payload and room for the ICRC: `len` bytes.
inline std::vector<std::byte> to_qpn(uint32_t qpn, size_t len = 12 + 4 + 4) {
  std::vector<std::byte> d(len);
  wire::BthWriter b(d.data());
  b.set_opcode(0x04);
  b.set_flags(false, false, 0, 0);
  b.set_pkey(0xFFFF);
  b.set_dest_qpn(wire::Qpn(qpn));
  b.set_ack_req_psn(true, wire::Psn(7));
  return d;
}

}  // namespace rocelab::host::packets
