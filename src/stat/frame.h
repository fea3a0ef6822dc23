// How a process answers `rocelab stat` on its registry socket: one frame, a
// fixed header and then a proto/stat.proto Process message, after which the
// process closes the connection. The header's layout never changes, so a
// reader can always tell which version of rocelab wrote a frame it cannot read.
//
//   magic "RLST" | layout version (u32) | body length (u32) | rocelab version (32 bytes, NUL-padded)
//
// Integers in host order: both ends are on one machine.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace rocelab::stat {

// What the body holds and how the registry is laid out: a reader refuses a
// frame of another layout, naming both versions.
inline constexpr uint32_t kStatLayoutVersion = 1;
inline constexpr char kFrameMagic[4] = {'R', 'L', 'S', 'T'};
inline constexpr uint32_t kMaxFrameBody = 64u << 20;

struct FrameHeader {
  char magic[4];
  uint32_t layout;
  uint32_t length;
  char version[32];
};
static_assert(sizeof(FrameHeader) == 44);

// This build's version of rocelab ("0.1").
std::string_view rocelab_version();

inline FrameHeader make_header(uint32_t length, uint32_t layout = kStatLayoutVersion,
                               std::string_view version = rocelab_version()) {
  FrameHeader h{};
  std::memcpy(h.magic, kFrameMagic, sizeof h.magic);
  h.layout = layout;
  h.length = length;
  std::memcpy(h.version, version.data(), std::min(version.size(), sizeof h.version - 1));
  return h;
}

inline std::string header_version(const FrameHeader& h) {
  return std::string(h.version, strnlen(h.version, sizeof h.version));
}

}  // namespace rocelab::stat
