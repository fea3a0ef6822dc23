// A small fixed-capacity set of IP addresses, without allocation after
// construction: the destinations a transport has learned are unreachable
// (Transport::take_unreachable), and the engine's list of peers it believes
// gone. When full, the oldest entry makes room for the newest.
#pragma once
#include <array>
#include <cstddef>
#include <span>

#include "wire/ip_udp.h"

namespace rocelab::emu {

class UnreachableSet {
 public:
  static constexpr size_t kCapacity = 16;

  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }

  bool contains(const wire::IpAddr& a) const {
    for (size_t i = 0; i < n_; ++i)
      if (addr_[i] == a) return true;
    return false;
  }

  void add(const wire::IpAddr& a) {
    if (contains(a)) return;
    if (n_ == kCapacity) erase_at(0);
    addr_[n_++] = a;
  }

  void erase(const wire::IpAddr& a) {
    for (size_t i = 0; i < n_; ++i)
      if (addr_[i] == a) return erase_at(i);
  }

  // Moves up to out.size() addresses into out (oldest first); returns how many.
  size_t take(std::span<wire::IpAddr> out) {
    size_t k = 0;
    while (k < out.size() && n_ > 0) {
      out[k++] = addr_[0];
      erase_at(0);
    }
    return k;
  }

 private:
  void erase_at(size_t i) {
    for (size_t j = i + 1; j < n_; ++j) addr_[j - 1] = addr_[j];
    --n_;
  }

  std::array<wire::IpAddr, kCapacity> addr_{};
  size_t n_ = 0;
};

}  // namespace rocelab::emu
