#include "replay/live_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace rocelab::replay::detail {

Reservation& Reservation::operator=(Reservation&& o) noexcept {
  if (this != &o) {
    if (p_) ::munmap(p_, n_);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}

Reservation::~Reservation() {
  if (p_) ::munmap(p_, n_);
}

std::string Reservation::reserve(uint64_t n) {
  if (n == 0 || n > kMaxOneSpan) return "a span of " + std::to_string(n) + " bytes cannot be reserved";
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return std::strerror(errno);
  // One written byte is one 4 KiB page, as PageBudget counts it.
  ::madvise(p, n, MADV_NOHUGEPAGE);
  if (p_) ::munmap(p_, n_);
  p_ = static_cast<std::byte*>(p);
  n_ = n;
  return {};
}

bool PageBudget::touch(uint32_t span, uint64_t offset, uint64_t n, unsigned copies) {
  if (n == 0) return true;
  const uint64_t first = offset / kPage, last = (offset + n - 1) / kPage;
  uint64_t fresh = 0;
  for (uint64_t p = first; p <= last; ++p)
    if (!seen_.count(uint64_t{span} << 34 | p)) ++fresh;
  if (fresh == 0) return true;
  if (fresh * copies > max_pages_ - pages_ || pages_ > max_pages_) return false;
  for (uint64_t p = first; p <= last; ++p) seen_.insert(uint64_t{span} << 34 | p);
  pages_ += fresh * copies;
  return true;
}

}  // namespace rocelab::replay::detail
