/*
 * mpi_check: an MPI program that checks the data it moves (tests/shim/mpi.sh
 * runs it with every rank under `rocelab run`, Open MPI over UCX).
 *
 *   mpi_check           three parts, every byte checked; rank 0 prints one
 *                       line per part ("mpi_check: p2p ok: ...", "mpi_check:
 *                       allreduce ok: ...", "mpi_check: rma ok: ...", or
 *                       "... FAILED: N errors"), then "mpi_check: all checks
 *                       passed" and the total time; exit 1 on any mismatch
 *   mpi_check --bench   ranks 0 and 1 only: ping-pong latency of 8 bytes and
 *                       streaming bandwidth of 1 MiB messages
 *                       ("mpi_check: bench latency ...", "mpi_check: bench
 *                       bandwidth ...")
 *
 * p2p: each rank sends messages of 1 B to 4 MiB + 3 B to its right neighbour
 * in a ring (non-blocking, all sizes in flight at once) and to every other
 * rank (MPI_Sendrecv), and checks what its left neighbour sent: the bytes
 * are a function of sender, size and position.
 * allreduce: MPI_SUM of int64 over 1 to 262144 elements (2 MiB), MPI_MAX of
 * doubles, and MPI_IN_PLACE; every result element checked exactly.
 * rma: a window of 2 MiB per rank. With fences: MPI_Put into the right
 * neighbour (small and 1 MiB), then MPI_Get from the left neighbour. With
 * MPI_Win_lock/unlock (passive target): MPI_Put into every other rank's
 * slot and MPI_Fetch_and_op (+1, 100 times per rank) on a counter of rank 0;
 * the counter must end at 100 x ranks and each value fetched be unique.
 *
 * Each rank also reports its network namespace (/proc/self/ns/net), so a
 * run across namespaces shows where its ranks ran.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kWinBytes = 2 << 20, kFopPerRank = 100, kNsLen = 64 };

static int rank, nranks;

static uint8_t pattern(int src, size_t size, size_t i) {
  return (uint8_t)((src * 131 + size * 7 + i * 31 + (i >> 8)) & 0xff);
}

static void fill(uint8_t *buf, int src, size_t size) {
  for (size_t i = 0; i < size; i++) buf[i] = pattern(src, size, i);
}

/* Counts bytes that differ; prints the first one. */
static long verify(const char *what, const uint8_t *buf, int src, size_t size) {
  long bad = 0;
  for (size_t i = 0; i < size; i++) {
    if (buf[i] != pattern(src, size, i)) {
      if (bad == 0)
        fprintf(stderr, "mpi_check: rank %d: %s from rank %d, %zu bytes: byte %zu is 0x%02x, want 0x%02x\n",
                rank, what, src, size, i, buf[i], pattern(src, size, i));
      bad++;
    }
  }
  return bad;
}

/* The errors of every rank, summed on all of them (a reduction the parts do
 * not depend on: it runs after their own checks). */
static long total_errors(long mine) {
  long all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "mpi_check: out of memory (%zu bytes)\n", n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

static const size_t kSizes[] = {1, 8, 64, 1000, 4096, 8193, 65536, 262147, 1 << 20, (4 << 20) + 3};
enum { kNSizes = sizeof kSizes / sizeof kSizes[0] };

static long part_p2p(long *bytes_out) {
  long bad = 0, bytes = 0;
  int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
  uint8_t *sbuf[kNSizes], *rbuf[kNSizes];
  MPI_Request req[2 * kNSizes];
  for (int k = 0; k < kNSizes; k++) {
    sbuf[k] = xmalloc(kSizes[k]);
    rbuf[k] = xmalloc(kSizes[k]);
    fill(sbuf[k], rank, kSizes[k]);
    memset(rbuf[k], 0xee, kSizes[k]);
  }
  /* The ring, every size in flight at once (tag = size index). */
  for (int k = 0; k < kNSizes; k++)
    MPI_Irecv(rbuf[k], (int)kSizes[k], MPI_BYTE, left, k, MPI_COMM_WORLD, &req[k]);
  for (int k = 0; k < kNSizes; k++)
    MPI_Isend(sbuf[k], (int)kSizes[k], MPI_BYTE, right, k, MPI_COMM_WORLD, &req[kNSizes + k]);
  MPI_Waitall(2 * kNSizes, req, MPI_STATUSES_IGNORE);
  for (int k = 0; k < kNSizes; k++) {
    bad += verify("ring message", rbuf[k], left, kSizes[k]);
    bytes += (long)kSizes[k];
  }
  /* Every pair, blocking, both directions at once. */
  for (int d = 1; d < nranks; d++) {
    int to = (rank + d) % nranks, from = (rank + nranks - d) % nranks;
    for (int k = 0; k < kNSizes; k += 3) {
      MPI_Status st;
      int count = -1;
      memset(rbuf[k], 0xee, kSizes[k]);
      MPI_Sendrecv(sbuf[k], (int)kSizes[k], MPI_BYTE, to, 100 + k, rbuf[k], (int)kSizes[k], MPI_BYTE,
                   from, 100 + k, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, MPI_BYTE, &count);
      if (count != (int)kSizes[k] || st.MPI_SOURCE != from) {
        fprintf(stderr, "mpi_check: rank %d: sendrecv from %d: count %d source %d, want %zu from %d\n", rank,
                from, count, st.MPI_SOURCE, kSizes[k], from);
        bad++;
      }
      bad += verify("sendrecv message", rbuf[k], from, kSizes[k]);
      bytes += (long)kSizes[k];
    }
  }
  for (int k = 0; k < kNSizes; k++) {
    free(sbuf[k]);
    free(rbuf[k]);
  }
  *bytes_out = bytes;
  return bad;
}

static long part_allreduce(long *count_out) {
  static const int kCounts[] = {1, 7, 1000, 65536, 262144};
  long bad = 0, count = 0;
  int n = nranks;
  for (size_t c = 0; c < sizeof kCounts / sizeof kCounts[0]; c++) {
    int len = kCounts[c];
    int64_t *in = xmalloc(len * sizeof *in), *out = xmalloc(len * sizeof *out);
    double *din = xmalloc(len * sizeof *din), *dout = xmalloc(len * sizeof *dout);
    for (int i = 0; i < len; i++) {
      in[i] = (int64_t)(rank + 1) * (i + 1) + ((int64_t)rank << 32);
      din[i] = (double)((rank * 7919 + i) % 1009) + rank * 0.5;
    }
    memset(out, 0, len * sizeof *out);
    MPI_Allreduce(in, out, len, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(din, dout, len, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long wrong = 0;
    for (int i = 0; i < len; i++) {
      /* sum over r of (r+1)(i+1) + r<<32 */
      int64_t want = (int64_t)n * (n + 1) / 2 * (i + 1) + (((int64_t)n * (n - 1) / 2) << 32);
      double dwant = 0;
      for (int r = 0; r < n; r++) {
        double v = (double)((r * 7919 + i) % 1009) + r * 0.5;
        if (r == 0 || v > dwant) dwant = v;
      }
      if (out[i] != want || dout[i] != dwant) {
        if (wrong == 0)
          fprintf(stderr, "mpi_check: rank %d: allreduce of %d: element %d is %lld / %g, want %lld / %g\n", rank,
                  len, i, (long long)out[i], dout[i], (long long)want, dwant);
        wrong++;
      }
    }
    /* In place: each rank's vector summed into itself. */
    for (int i = 0; i < len; i++) in[i] = rank + i;
    MPI_Allreduce(MPI_IN_PLACE, in, len, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < len; i++) {
      int64_t want = (int64_t)n * (n - 1) / 2 + (int64_t)n * i;
      if (in[i] != want) {
        if (wrong == 0)
          fprintf(stderr, "mpi_check: rank %d: in-place allreduce of %d: element %d is %lld, want %lld\n", rank,
                  len, i, (long long)in[i], (long long)want);
        wrong++;
      }
    }
    bad += wrong;
    count += 3 * (long)len;
    free(in);
    free(out);
    free(din);
    free(dout);
  }
  *count_out = count;
  return bad;
}

static long part_rma(long *bytes_out) {
  long bad = 0, bytes = 0;
  int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
  uint8_t *base;
  MPI_Win win;
  MPI_Win_allocate(kWinBytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  memset(base, 0, kWinBytes);
  const size_t small = 3000, big = 1 << 20;
  uint8_t *src = xmalloc(big), *dst = xmalloc(big);

  /* Active target (fence): Put into the right neighbour at offsets 0 and
   * 4096, each rank then checks what its left neighbour put. */
  MPI_Win_fence(0, win);
  fill(src, rank, small);
  MPI_Put(src, (int)small, MPI_BYTE, right, 0, (int)small, MPI_BYTE, win);
  MPI_Win_fence(0, win);
  bad += verify("fence put", base, left, small);
  fill(src, rank, big);
  MPI_Put(src, (int)big, MPI_BYTE, right, 4096, (int)big, MPI_BYTE, win);
  MPI_Win_fence(0, win);
  bad += verify("fence put (1 MiB)", base + 4096, left, big);
  bytes += (long)(small + big);
  /* Get back from the left neighbour what it has (what its own left put). */
  memset(dst, 0xee, big);
  MPI_Get(dst, (int)big, MPI_BYTE, left, 4096, (int)big, MPI_BYTE, win);
  MPI_Win_fence(0, win);
  bad += verify("fence get (1 MiB)", dst, (left + nranks - 1) % nranks, big);
  bytes += (long)big;
  MPI_Win_fence(0, win);

  /* Passive target: each rank puts into its own slot of every other rank's
   * window (slot r at offset 4096 + r * 8192), exclusive lock per target. */
  const size_t slot = 5000;
  fill(src, rank, slot);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int d = 1; d < nranks; d++) {
    int t = (rank + d) % nranks;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Put(src, (int)slot, MPI_BYTE, t, 4096 + (MPI_Aint)rank * 8192, (int)slot, MPI_BYTE, win);
    MPI_Win_unlock(t, win);
    bytes += (long)slot;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win); /* local access epoch for reading our window */
  for (int r = 0; r < nranks; r++)
    if (r != rank) bad += verify("lock/unlock put", base + 4096 + (size_t)r * 8192, r, slot);
  MPI_Win_unlock(rank, win);
  /* Get our own slot back from the right neighbour under a shared lock. */
  if (nranks > 1) {
    int s = rank;
    memset(dst, 0xee, slot);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_Get(dst, (int)slot, MPI_BYTE, right, 4096 + (MPI_Aint)s * 8192, (int)slot, MPI_BYTE, win);
    MPI_Win_unlock(right, win);
    bad += verify("lock/unlock get", dst, s, slot);
    bytes += (long)slot;
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* Atomics: a counter at offset 0 of rank 0's window, every rank adds 1
   * kFopPerRank times; the values fetched must all differ. */
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
  memset(base, 0, 8);
  MPI_Win_unlock(rank, win);
  MPI_Barrier(MPI_COMM_WORLD);
  int64_t one = 1, got[kFopPerRank];
  MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
  for (int i = 0; i < kFopPerRank; i++) {
    MPI_Fetch_and_op(&one, &got[i], MPI_INT64_T, 0, 0, MPI_SUM, win);
    MPI_Win_flush(0, win);
  }
  MPI_Win_unlock(0, win);
  for (int i = 1; i < kFopPerRank; i++)
    if (got[i] <= got[i - 1]) {
      if (bad == 0)
        fprintf(stderr, "mpi_check: rank %d: fetch_and_op %d fetched %lld after %lld\n", rank, i,
                (long long)got[i], (long long)got[i - 1]);
      bad++;
    }
  int64_t *all = rank == 0 ? xmalloc(sizeof(int64_t) * kFopPerRank * nranks) : NULL;
  MPI_Gather(got, kFopPerRank, MPI_INT64_T, all, kFopPerRank, MPI_INT64_T, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    int64_t final;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    memcpy(&final, base, 8);
    MPI_Win_unlock(0, win);
    long total = (long)kFopPerRank * nranks;
    char *seen = calloc(total, 1);
    for (long i = 0; i < total; i++) {
      if (all[i] < 0 || all[i] >= total || seen[all[i]]) {
        if (bad == 0) fprintf(stderr, "mpi_check: fetch_and_op value %lld fetched twice or out of range\n",
                              (long long)all[i]);
        bad++;
      } else {
        seen[all[i]] = 1;
      }
    }
    if (final != total) {
      fprintf(stderr, "mpi_check: fetch_and_op counter is %lld, want %ld\n", (long long)final, total);
      bad++;
    }
    free(seen);
    free(all);
  }
  MPI_Win_free(&win);
  free(src);
  free(dst);
  *bytes_out = bytes;
  return bad;
}

static void bench(void) {
  const int lat_iters = 2000, lat_warm = 200, bw_msgs = 16, bw_iters = 40, bw_warm = 4;
  const size_t bw_size = 1 << 20;
  uint8_t small[8] = {0}, ack = 0;
  uint8_t *buf = xmalloc(bw_size * bw_msgs);
  memset(buf, rank, bw_size * bw_msgs);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank < 2) {
    int peer = 1 - rank;
    double t0 = 0;
    for (int i = 0; i < lat_iters + lat_warm; i++) {
      if (i == lat_warm) t0 = MPI_Wtime();
      if (rank == 0) {
        MPI_Send(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        MPI_Recv(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
      }
    }
    double lat = (MPI_Wtime() - t0) / lat_iters / 2 * 1e6;
    MPI_Request req[bw_msgs];
    for (int i = 0; i < bw_iters + bw_warm; i++) {
      if (i == bw_warm) t0 = MPI_Wtime();
      for (int m = 0; m < bw_msgs; m++) {
        if (rank == 0)
          MPI_Isend(buf + m * bw_size, (int)bw_size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[m]);
        else
          MPI_Irecv(buf + m * bw_size, (int)bw_size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[m]);
      }
      MPI_Waitall(bw_msgs, req, MPI_STATUSES_IGNORE);
      if (rank == 0)
        MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else
        MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
    }
    double secs = MPI_Wtime() - t0;
    if (rank == 0) {
      printf("mpi_check: bench latency 8 B: %.2f us (half round trip, %d round trips)\n", lat, lat_iters);
      printf("mpi_check: bench bandwidth %zu B: %.1f MB/s (%d x %d messages)\n", bw_size,
             (double)bw_size * bw_msgs * bw_iters / secs / 1e6, bw_iters, bw_msgs);
    }
  }
  free(buf);
  MPI_Barrier(MPI_COMM_WORLD);
}

static void where(void) {
  char ns[kNsLen] = "?", *all = NULL;
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (n > 0) ns[n] = 0;
  if (rank == 0) all = xmalloc((size_t)kNsLen * nranks);
  MPI_Gather(ns, kNsLen, MPI_CHAR, all, kNsLen, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mpi_check: %d ranks; network namespaces:", nranks);
    for (int r = 0; r < nranks; r++) printf(" %d=%s", r, all + (size_t)r * kNsLen);
    printf("\n");
    free(all);
  }
}

int main(int argc, char **argv) {
  int do_bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  where();
  if (do_bench) {
    if (nranks < 2) {
      if (rank == 0) fprintf(stderr, "mpi_check: --bench needs 2 ranks\n");
      MPI_Finalize();
      return 2;
    }
    bench();
    MPI_Finalize();
    return 0;
  }
  double t0 = MPI_Wtime(), t;
  long failed = 0, amount;

  t = MPI_Wtime();
  long bad = total_errors(part_p2p(&amount));
  if (rank == 0) {
    if (bad) printf("mpi_check: p2p FAILED: %ld errors\n", bad);
    else printf("mpi_check: p2p ok: %ld bytes received per rank, sizes 1 to %zu B (%.3f s)\n", amount,
                kSizes[kNSizes - 1], MPI_Wtime() - t);
  }
  failed += bad;

  t = MPI_Wtime();
  bad = total_errors(part_allreduce(&amount));
  if (rank == 0) {
    if (bad) printf("mpi_check: allreduce FAILED: %ld errors\n", bad);
    else printf("mpi_check: allreduce ok: %ld elements (int64 sum, double max, in place) (%.3f s)\n", amount,
                MPI_Wtime() - t);
  }
  failed += bad;

  t = MPI_Wtime();
  bad = total_errors(part_rma(&amount));
  if (rank == 0) {
    if (bad) printf("mpi_check: rma FAILED: %ld errors\n", bad);
    else printf("mpi_check: rma ok: %ld bytes per rank put/got (fence, lock/unlock), %d fetch_and_op (%.3f s)\n",
                amount, kFopPerRank * nranks, MPI_Wtime() - t);
  }
  failed += bad;

  if (rank == 0) {
    if (failed == 0) printf("mpi_check: all checks passed\n");
    printf("mpi_check: total %.3f s\n", MPI_Wtime() - t0);
    fflush(stdout);
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}
