// The memory of `rocelab replay`'s live responder (replay.h): one span of
// addresses per R_Key, as wide as the VAs the capture's requests reach, that
// costs only the pages the replay writes. Internal to src/replay.
//
// A capture names virtual addresses, not how much memory its responder had:
// two WRITEs a gigabyte apart under one R_Key are legal on the wire and carry
// a few bytes. So each span is reserved, not allocated: an anonymous private
// mapping with MAP_NORESERVE (no swap accounted) and no transparent huge
// pages (a written byte costs one 4 KiB page, not 2 MiB). A page never
// written reads as zeroes through the kernel's zero page and costs nothing.
// Two limits, both checked before anything is touched, each with a message
// that names the R_Key: the address space the spans reserve together
// (max_span) and the pages written (max_memory, counted as they are
// written: the live MR's page and the shadow's, see replay.cc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>

namespace rocelab::replay::detail {

constexpr uint64_t kPage = 4096;

// One reservation of n bytes of zeroes (n > 0), unmapped when destroyed.
class Reservation {
 public:
  Reservation() = default;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  Reservation(Reservation&& o) noexcept { *this = std::move(o); }
  Reservation& operator=(Reservation&& o) noexcept;
  ~Reservation();

  // Empty string on success; else why (errno's text).
  std::string reserve(uint64_t n);
  std::byte* data() const { return p_; }
  uint64_t size() const { return n_; }

 private:
  std::byte* p_ = nullptr;
  uint64_t n_ = 0;
};

// The pages the replay has written across every span, against max_memory.
class PageBudget {
 public:
  explicit PageBudget(uint64_t max_bytes) : max_pages_(max_bytes / kPage) {}
  // Counts the pages of [offset, offset + n) of span `span` that were not
  // counted before, times `copies` (the live MR and its shadow); false, with
  // nothing counted, when that would pass the limit.
  bool touch(uint32_t span, uint64_t offset, uint64_t n, unsigned copies);
  uint64_t bytes() const { return pages_ * kPage; }
  uint64_t max_bytes() const { return max_pages_ * kPage; }

 private:
  uint64_t max_pages_, pages_ = 0;
  std::unordered_set<uint64_t> seen_;  // span << 34 | page index (a span has at most 2^34 pages)
};

// One span is at most this many bytes, whatever --max-span says: a 47-bit
// user address space holds a few of them, and PageBudget's keys hold the page
// index in 34 bits.
constexpr uint64_t kMaxOneSpan = uint64_t{1} << 46;

}  // namespace rocelab::replay::detail
