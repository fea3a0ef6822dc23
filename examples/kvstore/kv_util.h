/* kv_util.h: small helpers kv_server and kv_client share (clock, fatal
 * errors, number parsing, bounded waits for rdma_cm events). */
#ifndef KV_UTIL_H
#define KV_UTIL_H

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char* kv_prog; /* "kv_server" or "kv_client", for messages */

static inline uint64_t kv_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((format(printf, 1, 2), noreturn)) static inline void kv_die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: error: ", kv_prog);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

/* An unsigned number in [lo, hi], or a usage error (exit 2). */
static inline uint64_t kv_parse_u64(const char* s, const char* what, uint64_t lo, uint64_t hi) {
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
    fprintf(stderr, "%s: %s must be a number in %" PRIu64 "..%" PRIu64 ", not '%s'\n", kv_prog, what, lo, hi, s);
    exit(2);
  }
  return v;
}

static inline double kv_parse_double(const char* s, const char* what, double lo, double hi) {
  char* end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr, "%s: %s must be a number in %g..%g, not '%s'\n", kv_prog, what, lo, hi, s);
    exit(2);
  }
  return v;
}

/* The next rdma_cm event of `ch` within timeout_ms (the channel's fd is
 * non-blocking): 0 and *out acked-ready, or -1 with errno ETIMEDOUT. The
 * caller acks it with rdma_ack_cm_event. */
static inline int kv_next_cm_event(struct rdma_event_channel* ch, int timeout_ms, struct rdma_cm_event** out) {
  uint64_t deadline = kv_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  for (;;) {
    if (rdma_get_cm_event(ch, out) == 0) return 0;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    uint64_t now = kv_now_ns();
    if (now >= deadline) {
      errno = ETIMEDOUT;
      return -1;
    }
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    int wait_ms = (int)((deadline - now) / 1000000ull) + 1;
    if (poll(&p, 1, wait_ms) < 0 && errno != EINTR) return -1;
  }
}

#endif
