// The reaper: what the kernel's CM does for a process that dies with
// connections open, done for a process under `rocelab run`.
//
// When a process that holds rdma_cm connections exits, however it exits
// (exit, a crash, SIGKILL), the kernel closes its rdma_cm file, destroys its
// ids, and the IB CM sends a DREQ for every established connection: the peer
// gets DISCONNECTED. Here the CM lives in the process (src/cm), so nothing of
// it runs after SIGKILL. The reaper is a small process, forked when the shim
// starts, that holds for each established connection the DREQ datagram its
// end would send (cm::CmConfig::farewell writes and withdraws them in a
// shared mapping) and a pipe from the process. When the pipe reads EOF (the
// process is gone, or exec'd: the kernel closes the rdma_cm file on exec too)
// it sends what is left from the device's address and QP 1's UDP port, and
// exits. An orderly exit sends the DREQs itself (the shim's exit handler) and
// withdraws them, so the reaper then finds nothing to send.
//
// The reaper is forked twice over (it is not a child the program could wait
// for), leaves the session and the program's files (it keeps only its pipe
// and /dev/null), names itself "rocelab-reaper", and between fork and exit
// makes system calls only. What it sends is not in the program's --pcap or
// --events (they are closed by then). A connection beyond the table's
// kSlots has no farewell (counted in dropped()).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace rocelab::rdmacm_shim {

class Reaper {
 public:
  static constexpr size_t kSlots = 1024;
  static constexpr size_t kDatagramMax = 360;  // IPv6 + UDP + BTH + DETH + MAD + ICRC = 340

  // Maps the table and forks the reaper. False (errno set) when it could not;
  // the process then simply has no farewells.
  bool start() noexcept;
  // cm::CmConfig::farewell: keep datagram (IP and UDP headers, then the RoCE
  // packet) for key, or withdraw key's (empty datagram). Never blocks.
  void farewell(uint32_t key, std::span<const std::byte> datagram) noexcept;
  uint64_t dropped() const noexcept;

 private:
  struct Table;
  Table* table_ = nullptr;
};

}  // namespace rocelab::rdmacm_shim
