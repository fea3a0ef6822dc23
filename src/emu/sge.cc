// Walking a scatter/gather list: copying bytes at an offset of a message to
// or from the local memory its SGEs (resolved to Segs at post) describe.
#include <algorithm>
#include <cstring>

#include "emu/roles.h"

namespace rocelab::emu {

void gather(const Seg* segs, uint32_t nseg, uint64_t off, std::byte* dst, uint32_t n) {
  for (uint32_t i = 0; i < nseg && n > 0; ++i) {
    if (off >= segs[i].len) {
      off -= segs[i].len;
      continue;
    }
    const uint32_t k = std::min<uint64_t>(segs[i].len - off, n);
    std::memcpy(dst, segs[i].p + off, k);
    dst += k;
    n -= k;
    off = 0;
  }
}

void scatter(const Seg* segs, uint32_t nseg, uint64_t off, const std::byte* src, uint32_t n) {
  for (uint32_t i = 0; i < nseg && n > 0; ++i) {
    if (off >= segs[i].len) {
      off -= segs[i].len;
      continue;
    }
    const uint32_t k = std::min<uint64_t>(segs[i].len - off, n);
    std::memcpy(segs[i].p + off, src, k);
    src += k;
    n -= k;
    off = 0;
  }
}

}  // namespace rocelab::emu
