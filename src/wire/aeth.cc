#include "wire/aeth.h"

#include <array>

namespace rocelab::wire {

std::string_view to_string(NakCode c) {
  switch (c) {
    case NakCode::kPsnSeqError: return "PSN sequence error";
    case NakCode::kInvalidRequest: return "invalid request";
    case NakCode::kRemoteAccessError: return "remote access error";
    case NakCode::kRemoteOpError: return "remote operational error";
    case NakCode::kInvalidRdRequest: return "invalid RD request";
  }
  return "reserved";
}

uint32_t rnr_timer_us(uint8_t code) {
  // Values in microseconds (0.01 ms units in the spec table, times 10).
  static constexpr std::array<uint32_t, 32> kTable = {
      655360, 10,    20,    30,    40,    60,    80,    120,   160,    240,   320,
      480,    640,   960,   1280,  1920,  2560,  3840,  5120,  7680,   10240, 15360,
      20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return kTable[code & 0x1F];
}

}  // namespace rocelab::wire
