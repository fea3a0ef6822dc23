/* qp_mesh: one of N processes that exchange data all-to-all over RC, a plain
 * libibverbs program (tests/shim/qp_mesh.sh runs sixteen of them under
 * `rocelab run --share-address`, eight on each of two hosts).
 *
 *   qp_mesh -d DIR -r RANK -n RANKS [-k ROUNDS] [-s BYTES] [-P ROUND] [-x DEAD]
 *
 * Process RANK has one RC QP to every rank, itself included (a QP connected
 * to itself is a valid RC pair). The ranks meet through files in DIR, which
 * all of them can read: RANK.info (pid, GID, rkey, buffer address, the QPN of
 * the QP meant for each rank), then RANK.ready once its QPs are in RTS with
 * receives posted, and RANK.done when it has finished.
 *
 * To every rank it sends ROUNDS rounds of BYTES bytes: round k is one
 * RDMA_WRITE_WITH_IMM (immediate k) into slot k % 4 of the region the
 * receiver keeps for it, with a pattern made of (sender, receiver, k). The
 * receiver checks every byte of the slot and answers with a credit, a SEND
 * with immediate 0x80000000 | k; the sender has at most 4 rounds without a
 * credit per peer. A peer is complete when all ROUNDS rounds went both ways,
 * checked and acknowledged.
 *
 * A peer that makes no progress for a second gets a probe (SEND with
 * immediate 0xC0000000, which its receiver ignores); a dead peer does not
 * acknowledge it, and the probe's IBV_WC_RETRY_EXC_ERR marks the peer failed.
 * -P ROUND: once this rank has sent ROUND rounds to every peer it says
 * "paused" and stops (to be killed there; its device goes on answering; it
 * gives up with exit 1 after 120 s).
 * -x DEAD: the rank expected to fail; any other peer failing, DEAD not
 * failing, a byte out of place or a deadline of 120 s exits 1.
 *
 * Its last line: "qp_mesh: rank R: done: C complete, F failed [D], B bytes
 * checked from the complete ones, T in all". */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 4
#define RECVS (2 * SLOTS + 4)
#define SEND_WR 32
#define CREDIT 0x80000000u
#define PROBE 0xC0000000u
#define MAX_RANKS 64
#define DEADLINE_S 120.0

enum kind { K_WRITE = 1, K_CREDIT = 2, K_PROBE = 3, K_RECV = 4 };

#define DIE(...)                                          \
  do {                                                    \
    fprintf(stderr, "qp_mesh: rank %d: ", me);            \
    fprintf(stderr, __VA_ARGS__);                         \
    fprintf(stderr, "\n");                                \
    exit(1);                                              \
  } while (0)

struct peer {
  struct ibv_qp* qp;
  uint32_t dest_qpn, rkey;
  uint64_t addr;  // the peer's buffer: its receive region starts there
  union ibv_gid gid;
  uint32_t sent, credited, writes_done, received, credits_sent, credits_done;
  uint32_t credits_due;  // rounds checked whose credit is not posted yet
  int probing, failed;
  enum ibv_wc_status why;
  double last_progress;
};

static int me = -1, ranks = 0, rounds = 64, pause_at = -1, dead = -1;
static size_t slot_bytes = 16384;
static const char* dir;
static struct peer peers[MAX_RANKS];
static unsigned char* buf;  // receive region (ranks x SLOTS slots), then send region
static struct ibv_mr* mr;
static uint64_t checked_bytes;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint32_t psn_of(int from, int to) { return ((uint32_t)from * 131u + (uint32_t)to * 7919u + 1u) & 0xFFFFFFu; }

static unsigned char* recv_slot(int from, uint32_t k) {
  return buf + ((size_t)from * SLOTS + k % SLOTS) * slot_bytes;
}
static unsigned char* send_slot(int to, uint32_t k) {
  return buf + ((size_t)ranks * SLOTS + (size_t)to * SLOTS + k % SLOTS) * slot_bytes;
}

// Word i of round k from `from` to `to`.
static uint64_t pattern(int from, int to, uint32_t k, size_t i) {
  uint64_t seed = (uint64_t)from << 48 | (uint64_t)to << 32 | k;
  return seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
}

static void path(char* out, size_t n, int rank, const char* what) {
  snprintf(out, n, "%s/%d.%s", dir, rank, what);
}

static void touch(const char* what, const char* text) {
  char p[4096], tmp[4100];
  path(p, sizeof p, me, what);
  snprintf(tmp, sizeof tmp, "%s~", p);
  FILE* f = fopen(tmp, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, p) != 0) DIE("cannot write %s: %s", p, strerror(errno));
}

static int exists(int rank, const char* what) {
  char p[4096];
  path(p, sizeof p, rank, what);
  return access(p, F_OK) == 0;
}

// Waits (bounded) until every rank has written WHAT.
static void wait_all(const char* what) {
  double end = now() + 60;
  for (int r = 0; r < ranks; ++r)
    while (!exists(r, what)) {
      if (now() > end) DIE("rank %d never wrote %s", r, what);
      usleep(20000);
    }
}

static void post_recv(int j) {
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)j << 8 | K_RECV}, *bad;
  if (ibv_post_recv(peers[j].qp, &wr, &bad)) DIE("ibv_post_recv to rank %d", j);
}

static void post_send(int j, enum kind kind, uint32_t imm) {
  struct peer* p = &peers[j];
  struct ibv_sge sge;
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = (uint64_t)j << 8 | kind;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  if (kind == K_WRITE) {
    uint64_t* w = (uint64_t*)send_slot(j, imm);
    for (size_t i = 0; i < slot_bytes / 8; ++i) w[i] = pattern(me, j, imm, i);
    sge.addr = (uintptr_t)w;
    sge.length = (uint32_t)slot_bytes;
    sge.lkey = mr->lkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.wr.rdma.remote_addr = p->addr + ((uint64_t)me * SLOTS + imm % SLOTS) * slot_bytes;
    wr.wr.rdma.rkey = p->rkey;
  } else {
    wr.opcode = IBV_WR_SEND_WITH_IMM;
  }
  int err = ibv_post_send(p->qp, &wr, &bad);
  if (err) DIE("ibv_post_send to rank %d: %s", j, strerror(err));
}

static int complete(const struct peer* p) {
  uint32_t k = (uint32_t)rounds;
  return p->credited == k && p->writes_done == k && p->received == k && p->credits_done == k && !p->probing &&
         !p->credits_due;
}

static void fail(int j, enum ibv_wc_status why) {
  if (peers[j].failed) return;
  peers[j].failed = 1;
  peers[j].why = why;
  printf("qp_mesh: rank %d: peer %d failed: %s\n", me, j, ibv_wc_status_str(why));
  fflush(stdout);
}

static void on_completion(const struct ibv_wc* wc) {
  int j = (int)(wc->wr_id >> 8);
  enum kind kind = (enum kind)(wc->wr_id & 0xFF);
  if (j < 0 || j >= ranks) DIE("completion with wr_id 0x%llx", (unsigned long long)wc->wr_id);
  struct peer* p = &peers[j];
  if (wc->status != IBV_WC_SUCCESS) {
    fail(j, wc->status);
    return;
  }
  double t = now();
  switch (kind) {
    case K_WRITE: ++p->writes_done; p->last_progress = t; return;
    case K_CREDIT: ++p->credits_done; p->last_progress = t; return;
    case K_PROBE: p->probing = 0; p->last_progress = t; return;
    case K_RECV: break;
  }
  uint32_t imm = ntohl(wc->imm_data);
  if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    if (imm != p->received) DIE("round %u from rank %d arrived where %u was due", imm, j, p->received);
    const uint64_t* w = (const uint64_t*)recv_slot(j, imm);
    for (size_t i = 0; i < slot_bytes / 8; ++i)
      if (w[i] != pattern(j, me, imm, i))
        DIE("round %u from rank %d: byte %zu is wrong (word 0x%016llx, want 0x%016llx)", imm, j, i * 8,
            (unsigned long long)w[i], (unsigned long long)pattern(j, me, imm, i));
    checked_bytes += slot_bytes;
    ++p->received;
    ++p->credits_due;
  } else if (wc->opcode == IBV_WC_RECV && (wc->wc_flags & IBV_WC_WITH_IMM) && imm == PROBE) {
    // a peer checking we are alive: nothing to do
  } else if (wc->opcode == IBV_WC_RECV && (wc->wc_flags & IBV_WC_WITH_IMM) && (imm & PROBE) == CREDIT) {
    if ((imm & ~CREDIT) != p->credited) DIE("credit for round %u from rank %d where %u was due", imm & ~CREDIT, j, p->credited);
    ++p->credited;
  } else {
    DIE("unexpected receive from rank %d (opcode %d, imm 0x%x)", j, wc->opcode, imm);
  }
  p->last_progress = t;
  post_recv(j);
}

// Posts what the windows allow; probes a peer that has been quiet for a second.
// Send WRs of p posted and not completed.
static uint32_t in_flight(const struct peer* p) {
  return (p->sent - p->writes_done) + (p->credits_sent - p->credits_done) + (uint32_t)p->probing;
}

static void advance(void) {
  double t = now();
  for (int j = 0; j < ranks; ++j) {
    struct peer* p = &peers[j];
    if (p->failed) continue;
    // Credits first (the peer waits for them), as the send queue has room:
    // their completions may lag behind the credits' arrival (the peer's
    // acknowledgements are coalesced), so more than SLOTS can be in flight.
    for (; p->credits_due && in_flight(p) < SEND_WR; --p->credits_due, ++p->credits_sent)
      post_send(j, K_CREDIT, CREDIT | (p->credits_sent));
    while (p->sent < (uint32_t)rounds && p->sent - p->credited < SLOTS && p->sent - p->writes_done < SLOTS &&
           in_flight(p) < SEND_WR) {
      post_send(j, K_WRITE, p->sent);
      ++p->sent;
    }
    if (!complete(p) && !p->probing && in_flight(p) < SEND_WR && t - p->last_progress > 1.0) {
      post_send(j, K_PROBE, PROBE);
      p->probing = 1;
    }
  }
}

static void connect_qp(int j, const char* info) {
  struct peer* p = &peers[j];
  int pid;
  char gid[33];
  unsigned long long addr;
  int used = 0;
  if (sscanf(info, "%d %32s %u %llx%n", &pid, gid, &p->rkey, &addr, &used) != 4) DIE("rank %d's info is unreadable", j);
  p->addr = addr;
  for (int i = 0; i < 16; ++i) {
    unsigned b;
    if (sscanf(gid + 2 * i, "%2x", &b) != 1) DIE("rank %d's GID is unreadable", j);
    p->gid.raw[i] = (uint8_t)b;
  }
  const char* q = info + used;
  for (int i = 0; i <= me; ++i) {
    int n = 0;
    if (sscanf(q, "%x%n", &p->dest_qpn, &n) != 1) DIE("rank %d's info lacks QPN %d", j, i);
    q += n;
  }
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) DIE("INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = p->dest_qpn;
  a.rq_psn = psn_of(j, me);
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = p->gid;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    DIE("RTR to rank %d", j);
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn_of(me, j);
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
    DIE("RTS to rank %d", j);
}

static char* read_info(int rank) {
  static char text[MAX_RANKS * 12 + 256];
  char p[4096];
  path(p, sizeof p, rank, "info");
  FILE* f = fopen(p, "r");
  if (!f) DIE("cannot read %s", p);
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  return text;
}

int main(int argc, char** argv) {
  int c;
  while ((c = getopt(argc, argv, "d:r:n:k:s:P:x:")) != -1) {
    switch (c) {
      case 'd': dir = optarg; break;
      case 'r': me = atoi(optarg); break;
      case 'n': ranks = atoi(optarg); break;
      case 'k': rounds = atoi(optarg); break;
      case 's': slot_bytes = (size_t)atol(optarg); break;
      case 'P': pause_at = atoi(optarg); break;
      case 'x': dead = atoi(optarg); break;
      default: return 2;
    }
  }
  if (!dir || ranks < 1 || ranks > MAX_RANKS || me < 0 || me >= ranks || rounds < 1 || slot_bytes < 8 ||
      slot_bytes % 8 || slot_bytes > (1u << 20)) {
    fprintf(stderr, "usage: qp_mesh -d DIR -r RANK -n RANKS (1..%d) [-k ROUNDS] [-s BYTES, a multiple of 8]\n",
            MAX_RANKS);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);

  int ndev = 0;
  struct ibv_device** devs = ibv_get_device_list(&ndev);
  if (!devs || ndev < 1) DIE("no RDMA device");
  struct ibv_context* ctx = ibv_open_device(devs[0]);
  if (!ctx) DIE("ibv_open_device");
  union ibv_gid gid;
  if (ibv_query_gid(ctx, 1, 0, &gid)) DIE("ibv_query_gid");
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  if (!pd || !ch) DIE("ibv_alloc_pd / ibv_create_comp_channel");
  int cqe = ranks * (SEND_WR + RECVS) + 16;
  struct ibv_cq* cq = ibv_create_cq(ctx, cqe, NULL, ch, 0);
  if (!cq) DIE("ibv_create_cq");
  size_t len = 2 * (size_t)ranks * SLOTS * slot_bytes;
  buf = calloc(1, len);
  if (!buf) DIE("out of memory");
  mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) DIE("ibv_reg_mr");

  char info[MAX_RANKS * 12 + 256];
  int at = snprintf(info, sizeof info, "%d ", (int)getpid());
  for (int i = 0; i < 16; ++i) at += snprintf(info + at, sizeof info - (size_t)at, "%02x", gid.raw[i]);
  at += snprintf(info + at, sizeof info - (size_t)at, " %u %llx", mr->rkey, (unsigned long long)(uintptr_t)buf);
  for (int j = 0; j < ranks; ++j) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = SEND_WR;
    ia.cap.max_recv_wr = RECVS;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    peers[j].qp = ibv_create_qp(pd, &ia);
    if (!peers[j].qp) DIE("ibv_create_qp for rank %d", j);
    at += snprintf(info + at, sizeof info - (size_t)at, " %x", peers[j].qp->qp_num);
  }
  snprintf(info + at, sizeof info - (size_t)at, "\n");
  touch("info", info);
  wait_all("info");
  for (int j = 0; j < ranks; ++j) {
    connect_qp(j, read_info(j));
    for (int i = 0; i < RECVS; ++i) post_recv(j);
  }
  touch("ready", "\n");
  wait_all("ready");
  printf("qp_mesh: rank %d: %d QPs connected (QPN 0x%06x..0x%06x)\n", me, ranks, peers[0].qp->qp_num,
         peers[ranks - 1].qp->qp_num);

  double start = now();
  for (int j = 0; j < ranks; ++j) peers[j].last_progress = start;
  if (ibv_req_notify_cq(cq, 0)) DIE("ibv_req_notify_cq");
  int done_written = 0;
  for (;;) {
    struct ibv_wc wc[64];
    int n;
    while ((n = ibv_poll_cq(cq, 64, wc)) > 0)
      for (int i = 0; i < n; ++i) on_completion(&wc[i]);
    if (n < 0) DIE("ibv_poll_cq");
    advance();

    if (pause_at >= 0) {
      int all = 1;
      for (int j = 0; j < ranks; ++j) all &= peers[j].sent >= (uint32_t)pause_at;
      if (all) {
        printf("qp_mesh: rank %d: paused after round %d\n", me, pause_at);
        sleep((unsigned)DEADLINE_S);
        DIE("paused and not killed within %.0f s", DEADLINE_S);
      }
    }
    int finished = 1;
    for (int j = 0; j < ranks; ++j) finished &= peers[j].failed || complete(&peers[j]);
    if (finished && !done_written) {
      touch("done", "\n");
      done_written = 1;
    }
    if (done_written) {
      // Wait for the others before the QPs go: a peer may still be waiting
      // for the acknowledgement of its last credit.
      int all = 1;
      for (int j = 0; j < ranks; ++j) all &= peers[j].failed || exists(j, "done");
      if (all) break;
    }
    if (now() - start > DEADLINE_S) {
      for (int j = 0; j < ranks; ++j) {
        struct peer* p = &peers[j];
        fprintf(stderr, "qp_mesh: rank %d: peer %d: sent %u credited %u written %u received %u credits %u/%u%s%s\n", me,
                j, p->sent, p->credited, p->writes_done, p->received, p->credits_done, p->credits_sent,
                p->probing ? " probing" : "", p->failed ? " failed" : "");
      }
      DIE("not finished after %.0f s", DEADLINE_S);
    }

    struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
    if (poll(&pfd, 1, done_written ? 20 : 100) > 0) {
      struct ibv_cq* ev_cq;
      void* ev_ctx;
      if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) DIE("ibv_get_cq_event");
      ibv_ack_cq_events(ev_cq, 1);
    }
    if (ibv_req_notify_cq(cq, 0)) DIE("ibv_req_notify_cq");
  }

  int ok = 0, failed = 0, bad = 0;
  char failed_list[MAX_RANKS * 4 + 1] = "";
  for (int j = 0; j < ranks; ++j) {
    if (peers[j].failed) {
      ++failed;
      size_t l = strlen(failed_list);
      snprintf(failed_list + l, sizeof failed_list - l, "%s%d", l ? " " : "", j);
      bad |= j != dead;
    } else {
      ++ok;
      bad |= j == dead;
    }
  }
  uint64_t from_complete = 0;
  for (int j = 0; j < ranks; ++j)
    if (!peers[j].failed) from_complete += (uint64_t)peers[j].received * slot_bytes;
  printf("qp_mesh: rank %d: done: %d complete, %d failed [%s], %llu bytes checked from the complete ones, %llu in all\n",
         me, ok, failed, failed_list, (unsigned long long)from_complete, (unsigned long long)checked_bytes);
  for (int j = 0; j < ranks; ++j) ibv_destroy_qp(peers[j].qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_destroy_comp_channel(ch);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(devs);
  free(buf);
  return bad;
}
