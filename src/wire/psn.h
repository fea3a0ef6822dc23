// 24-bit transport quantities: PSN, QPN, MSN. PSN arithmetic is modular
// (IBTA 9.7.1): compare only through Psn, never on raw integers.
#pragma once
#include <compare>
#include <cstdint>

namespace rocelab::wire {

inline constexpr uint32_t kMask24 = 0xFFFFFF;

class Psn {
 public:
  constexpr Psn() = default;
  constexpr explicit Psn(uint32_t v) : v_(v & kMask24) {}
  constexpr uint32_t value() const { return v_; }

  constexpr Psn operator+(uint32_t n) const { return Psn(v_ + n); }
  constexpr Psn operator-(uint32_t n) const { return Psn(v_ - n); }
  constexpr Psn& operator+=(uint32_t n) { v_ = (v_ + n) & kMask24; return *this; }
  constexpr Psn& operator++() { return *this += 1; }

  // Signed distance this - other in (-2^23, 2^23]: positive when this is after other.
  constexpr int32_t distance(Psn other) const {
    uint32_t d = (v_ - other.v_) & kMask24;
    return d & 0x800000 ? static_cast<int32_t>(d) - 0x1000000 : static_cast<int32_t>(d);
  }
  constexpr bool before(Psn other) const { return distance(other) < 0; }
  constexpr bool after(Psn other) const { return distance(other) > 0; }
  constexpr bool operator==(const Psn&) const = default;

 private:
  uint32_t v_ = 0;
};

// Queue pair number: 24 bits on the wire. QPN 1 is the GSI QP; 0xFFFFFF is multicast.
class Qpn {
 public:
  constexpr Qpn() = default;
  constexpr explicit Qpn(uint32_t v) : v_(v & kMask24) {}
  constexpr uint32_t value() const { return v_; }
  constexpr auto operator<=>(const Qpn&) const = default;

 private:
  uint32_t v_ = 0;
};

inline constexpr Qpn kGsiQpn{1};
inline constexpr Qpn kMulticastQpn{0xFFFFFF};

static_assert(Psn(0xFFFFFF).distance(Psn(0)) == -1);
static_assert(Psn(0).after(Psn(0xFFFFFF)));
static_assert((Psn(0xFFFFFF) + 2).value() == 1);

}  // namespace rocelab::wire
