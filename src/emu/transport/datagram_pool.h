// Copies of datagrams held for later (the simulated fabric's packets in
// flight, the fault injector's delayed and reordered ones): numbered buffers
// that go back to a free list and are reused, each reserved for one MTU-sized
// RoCE packet, so steady traffic allocates nothing. Not thread-safe: its
// owner's lock (the engine's) guards it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rocelab::emu {

class DatagramPool {
 public:
  static constexpr size_t kReserve = 4096 + 128;  // one MTU-sized RoCE packet

  // A buffer holding a copy of payload; its number.
  uint32_t copy(std::span<const std::byte> payload) {
    uint32_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = static_cast<uint32_t>(buffers_.size());
      buffers_.emplace_back().reserve(kReserve);
    }
    buffers_[b].assign(payload.begin(), payload.end());
    return b;
  }
  // Buffer b's first len bytes (valid until b is released).
  std::span<std::byte> bytes(uint32_t b, uint32_t len) { return std::span(buffers_[b]).first(len); }
  std::span<const std::byte> bytes(uint32_t b, uint32_t len) const { return std::span(buffers_[b]).first(len); }
  void release(uint32_t b) { free_.push_back(b); }
  size_t in_use() const { return buffers_.size() - free_.size(); }

 private:
  std::vector<std::vector<std::byte>> buffers_;
  std::vector<uint32_t> free_;
};

}  // namespace rocelab::emu
