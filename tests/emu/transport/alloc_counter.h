// Counts global operator new calls, to check that a hot path allocates nothing
// in steady state. Include in exactly one translation unit of a test binary.
#pragma once
#include <atomic>
#include <cstdlib>
#include <new>

namespace rocelab::test {
inline std::atomic<long> g_allocations{0};
}  // namespace rocelab::test

void* operator new(std::size_t n) {
  rocelab::test::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
