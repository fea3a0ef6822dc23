// Work-request lists to engine spans, in fixed-size chunks on the stack: the
// hot path allocates nothing. A chunk ends early when its SGE buffer is full.
#pragma once
#include <infiniband/verbs.h>

#include <cerrno>
#include <system_error>

#include "emu/verbs_attrs.h"
#include "verbs_shim/shim_objects.h"

namespace rocelab::verbs_shim {

inline constexpr size_t kPostChunk = 16;
inline constexpr size_t kPostSges = 256;

// ud_qp: the QP is UD (only then are wr.wr.ud's fields read).
emu::SendWr to_emu(const ibv_send_wr& wr, std::span<const emu::Sge> sges, bool ud_qp);

// Posts `wr` and its successors through post(span, &n_posted) and returns
// post's error as an errno value (0: all posted), setting *bad_wr to the first
// WR not posted.
template <typename Wr, typename EmuWr, typename Convert, typename Post>
int post_chunks(Wr* wr, Wr** bad_wr, Convert convert, Post post) {
  EmuWr wrs[kPostChunk];
  Wr* src[kPostChunk];
  emu::Sge sges[kPostSges];
  while (wr) {
    size_t n = 0, used = 0;
    for (Wr* w = wr; w && n < kPostChunk; w = w->next) {
      if (w->num_sge < 0) {
        if (n == 0) {
          *bad_wr = w;
          return EINVAL;
        }
        break;
      }
      size_t k = static_cast<size_t>(w->num_sge);
      if (used + k > kPostSges) {
        if (n == 0) {  // more SGEs than any device allows
          *bad_wr = w;
          return EINVAL;
        }
        break;
      }
      for (size_t i = 0; i < k; ++i) {
        sges[used + i] = emu::Sge{w->sg_list[i].addr, w->sg_list[i].length, w->sg_list[i].lkey};
      }
      wrs[n] = convert(*w, std::span<const emu::Sge>(sges + used, k));
      src[n++] = w;
      used += k;
    }
    size_t posted = 0;
    std::error_code ec = post(std::span<const EmuWr>(wrs, n), &posted);
    if (ec) {
      *bad_wr = src[posted < n ? posted : n - 1];
      return ec.value();
    }
    wr = src[n - 1]->next;
  }
  return 0;
}

template <typename Post>
int post_recv_chunks(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, Post post) {
  return post_chunks<ibv_recv_wr, emu::RecvWr>(
      wr, bad_wr,
      [](const ibv_recv_wr& w, std::span<const emu::Sge> s) { return emu::RecvWr{w.wr_id, s}; },
      post);
}

}  // namespace rocelab::verbs_shim
