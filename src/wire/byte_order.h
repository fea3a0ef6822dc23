// Explicit big-endian loads and stores over byte spans. Wire headers use these
// instead of bitfields or packed structs (docs/style.md §4).
#pragma once
#include <cstddef>
#include <cstdint>

namespace rocelab::wire {

inline uint8_t load8(const std::byte* p) { return static_cast<uint8_t>(p[0]); }
inline uint16_t load_be16(const std::byte* p) {
  return static_cast<uint16_t>((load8(p) << 8) | load8(p + 1));
}
inline uint32_t load_be24(const std::byte* p) {
  return (uint32_t{load8(p)} << 16) | (uint32_t{load8(p + 1)} << 8) | load8(p + 2);
}
inline uint32_t load_be32(const std::byte* p) {
  return (uint32_t{load_be16(p)} << 16) | load_be16(p + 2);
}
inline uint64_t load_be64(const std::byte* p) {
  return (uint64_t{load_be32(p)} << 32) | load_be32(p + 4);
}
inline uint32_t load_le32(const std::byte* p) {
  return uint32_t{load8(p)} | (uint32_t{load8(p + 1)} << 8) | (uint32_t{load8(p + 2)} << 16) |
         (uint32_t{load8(p + 3)} << 24);
}

inline void store8(std::byte* p, uint8_t v) { p[0] = std::byte{v}; }
inline void store_be16(std::byte* p, uint16_t v) {
  store8(p, static_cast<uint8_t>(v >> 8));
  store8(p + 1, static_cast<uint8_t>(v));
}
inline void store_be24(std::byte* p, uint32_t v) {
  store8(p, static_cast<uint8_t>(v >> 16));
  store_be16(p + 1, static_cast<uint16_t>(v));
}
inline void store_be32(std::byte* p, uint32_t v) {
  store_be16(p, static_cast<uint16_t>(v >> 16));
  store_be16(p + 2, static_cast<uint16_t>(v));
}
inline void store_be64(std::byte* p, uint64_t v) {
  store_be32(p, static_cast<uint32_t>(v >> 32));
  store_be32(p + 4, static_cast<uint32_t>(v));
}
inline void store_le32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) store8(p + i, static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace rocelab::wire
