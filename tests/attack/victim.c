/* attack_victim: the victim of tests/attack/impersonate.sh,
 * a plain libibverbs program run under `rocelab run`. Its RC QPs are connected
 * to PEER_IP, where rocelab_impersonator (tests/attack/impersonator.cc) sits
 * and, being the connected peer as far as addresses go, can reach each QP's
 * responder at the PSN it expects: the attacks a NIC must refuse by its
 * checks, not by the PSN window.
 *
 *   attack_victim PEER_IP
 *
 * Memory: five 4 KiB regions between 64-byte guards, each filled with a
 * pattern (byte j of region r is j*37 + r*11 + 1; guards 0xE7):
 *   rw     remote write, read and atomic
 *   ro     remote read only
 *   wo     remote write only
 *   none   local write only
 *   stale  registered with remote write, then deregistered
 * in PD 1 with the case QPs (0x100 + i at the peer), the liveness QP and a UD
 * QP (Q_Key 0x11111111, 4 receives posted); four "bag" RC QPs and a UD bag QP
 * in PD 2, which holds no MR with remote access: the malformed packets are
 * aimed at them. Receive buffers are separate memory (the application hands
 * them to the device to be written).
 *
 * Prints "info NAME VALUE" lines (QPNs, R_Keys, VAs), then "ready", then waits
 * for a line on stdin (or its end). Then it reports and judges:
 *   - "qp NAME STATE" for every QP (the script judges which must be ERR);
 *   - the UD receives completed (exactly one, the right Q_Key, 32 bytes of 0xC3);
 *   - memory: the whole of it, guards included, byte for byte against what the
 *     peer was allowed to change: rw[0,64) = 0xA7 (a WRITE), rw[64,72) the
 *     pattern's little-endian u64 + 1 (a FETCH_ADD), rw[128,192) = 0x5A (the
 *     liveness WRITE after the malformed packets). Anything else that differs
 *     is printed and fails.
 * Exit 0 when every judgement holds, 1 otherwise. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REGION 4096
#define GUARD 64
#define NREGIONS 5
#define NCASES 18
#define NBAGS 4
#define QKEY 0x11111111u

#define CHECK(c, ...)                                \
  do {                                               \
    if (!(c)) {                                      \
      fprintf(stderr, "attack_victim: FAILED %s: ", #c); \
      fprintf(stderr, __VA_ARGS__);                  \
      fprintf(stderr, "\n");                         \
      exit(1);                                       \
    }                                                \
  } while (0)

static const char* const kRegionName[NREGIONS] = {"rw", "ro", "wo", "none", "stale"};
static const int kRegionAccess[NREGIONS] = {
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
    IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
    IBV_ACCESS_LOCAL_WRITE,
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
};

static unsigned char mem[GUARD + NREGIONS * (REGION + GUARD)] __attribute__((aligned(4096)));
static unsigned char expected[sizeof mem];
static unsigned char recvbuf[2][4 * 4096] __attribute__((aligned(4096)));

static unsigned char* region(int r) { return mem + GUARD + (size_t)r * (REGION + GUARD); }

static struct ibv_context* ctx;
static union ibv_gid peer_gid;

static void to_rts(struct ibv_qp* qp, uint32_t dest_qpn) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), "INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.dgid = peer_gid;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), "RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), "RTS");
}

static struct ibv_qp* make_qp(struct ibv_pd* pd, struct ibv_cq* cq, enum ibv_qp_type type) {
  struct ibv_qp_init_attr qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = type;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  struct ibv_qp* qp = ibv_create_qp(pd, &qa);
  CHECK(qp, "ibv_create_qp");
  return qp;
}

static void make_ud(struct ibv_qp* qp, struct ibv_mr* mr, unsigned char* buf) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = QKEY;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "UD INIT");
  a.qp_state = IBV_QPS_RTR;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "UD RTR");
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "UD RTS");
  for (int i = 0; i < 4; ++i) {
    struct ibv_sge s = {(uintptr_t)(buf + i * 4096), 4096, mr->lkey};
    struct ibv_recv_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 100 + (uint64_t)i;
    wr.sg_list = &s;
    wr.num_sge = 1;
    CHECK(!ibv_post_recv(qp, &wr, &bad), "ibv_post_recv");
  }
}

static const char* state_name(struct ibv_qp* qp) {
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr ia;
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) return "?";
  switch (a.qp_state) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    case IBV_QPS_UNKNOWN: return "?";
    default: return "?";
  }
}

int main(int argc, char** argv) {
  CHECK(argc == 2, "usage: attack_victim PEER_IPV4");
  struct in_addr peer;
  CHECK(inet_pton(AF_INET, argv[1], &peer) == 1, "not an IPv4 address: %s", argv[1]);
  memset(&peer_gid, 0, sizeof peer_gid);
  peer_gid.raw[10] = peer_gid.raw[11] = 0xff;
  memcpy(&peer_gid.raw[12], &peer, 4);

  memset(mem, 0xE7, sizeof mem);
  for (int r = 0; r < NREGIONS; ++r)
    for (int j = 0; j < REGION; ++j) region(r)[j] = (unsigned char)(j * 37 + r * 11 + 1);

  struct ibv_device** list = ibv_get_device_list(NULL);
  CHECK(list && list[0], "no device");
  ctx = ibv_open_device(list[0]);
  CHECK(ctx, "ibv_open_device");
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_pd* bag_pd = ibv_alloc_pd(ctx);
  struct ibv_cq* cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
  CHECK(pd && bag_pd && cq, "setup");
  struct ibv_mr* mr[NREGIONS];
  for (int r = 0; r < NREGIONS; ++r) {
    mr[r] = ibv_reg_mr(pd, region(r), REGION, kRegionAccess[r]);
    CHECK(mr[r], "ibv_reg_mr %s", kRegionName[r]);
  }
  const uint32_t stale_rkey = mr[4]->rkey;
  CHECK(!ibv_dereg_mr(mr[4]), "ibv_dereg_mr");
  struct ibv_mr* rmr = ibv_reg_mr(pd, recvbuf[0], sizeof recvbuf[0], IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr* bag_rmr = ibv_reg_mr(bag_pd, recvbuf[1], sizeof recvbuf[1], IBV_ACCESS_LOCAL_WRITE);
  CHECK(rmr && bag_rmr, "ibv_reg_mr receive buffers");

  struct ibv_qp* cases[NCASES];
  for (int i = 0; i < NCASES; ++i) {
    cases[i] = make_qp(pd, cq, IBV_QPT_RC);
    to_rts(cases[i], 0x100 + (uint32_t)i);
  }
  struct ibv_qp* live = make_qp(pd, cq, IBV_QPT_RC);
  to_rts(live, 0x1FF);
  struct ibv_qp* bags[NBAGS];
  for (int i = 0; i < NBAGS; ++i) {
    bags[i] = make_qp(bag_pd, cq, IBV_QPT_RC);
    to_rts(bags[i], 0x200 + (uint32_t)i);
  }
  struct ibv_qp* ud = make_qp(pd, cq, IBV_QPT_UD);
  make_ud(ud, rmr, recvbuf[0]);
  struct ibv_qp* bag_ud = make_qp(bag_pd, cq, IBV_QPT_UD);
  make_ud(bag_ud, bag_rmr, recvbuf[1]);

  for (int i = 0; i < NCASES; ++i) printf("info case%d 0x%x\n", i, cases[i]->qp_num);
  printf("info live 0x%x\n", live->qp_num);
  for (int i = 0; i < NBAGS; ++i) printf("info bag%d 0x%x\n", i, bags[i]->qp_num);
  printf("info ud 0x%x\ninfo bag_ud 0x%x\ninfo qkey 0x%x\n", ud->qp_num, bag_ud->qp_num, QKEY);
  for (int r = 0; r < NREGIONS; ++r)
    printf("info rkey_%s 0x%x\ninfo va_%s 0x%llx\n", kRegionName[r], r == 4 ? stale_rkey : mr[r]->rkey,
           kRegionName[r], (unsigned long long)(uintptr_t)region(r));
  printf("ready\n");
  fflush(stdout);

  char line[64];
  (void)!fgets(line, sizeof line, stdin);

  int ok = 1;
  for (int i = 0; i < NCASES; ++i) printf("qp case%d %s\n", i, state_name(cases[i]));
  printf("qp live %s\n", state_name(live));
  for (int i = 0; i < NBAGS; ++i) printf("qp bag%d %s\n", i, state_name(bags[i]));
  printf("qp ud %s\nqp bag_ud %s\n", state_name(ud), state_name(bag_ud));

  /* The completions: only UD receives are expected (nothing here posts sends);
   * a flushed receive of a bag QP in ERR is a completion too. */
  int ud_ok = 0, ud_other = 0;
  struct ibv_wc wc[32];
  for (;;) {
    int n = ibv_poll_cq(cq, 32, wc);
    CHECK(n >= 0, "ibv_poll_cq");
    if (n == 0) break;
    for (int k = 0; k < n; ++k) {
      if (wc[k].qp_num != ud->qp_num) continue;
      const unsigned char* p = recvbuf[0] + (wc[k].wr_id - 100) * 4096 + 40; /* behind the GRH */
      int payload_ok = wc[k].status == IBV_WC_SUCCESS && wc[k].byte_len == 40 + 32 && wc[k].src_qp == 0x300;
      for (int j = 0; payload_ok && j < 32; ++j) payload_ok = p[j] == 0xC3;
      if (payload_ok) ++ud_ok; else ++ud_other;
      printf("ud receive: wr_id %llu status %s byte_len %u src_qp 0x%x\n", (unsigned long long)wc[k].wr_id,
             ibv_wc_status_str(wc[k].status), wc[k].byte_len, wc[k].src_qp);
    }
  }
  printf("ud receives: %d with the right Q_Key and payload, %d other\n", ud_ok, ud_other);
  if (ud_ok != 1 || ud_other != 0) ok = 0;

  /* What the peer was allowed to change, and nothing else. */
  memset(expected, 0xE7, sizeof expected);
  for (int r = 0; r < NREGIONS; ++r)
    for (int j = 0; j < REGION; ++j) expected[region(r) - mem + j] = (unsigned char)(j * 37 + r * 11 + 1);
  unsigned char* rw = expected + (region(0) - mem);
  memset(rw, 0xA7, 64);
  uint64_t v;
  memcpy(&v, rw + 64, 8);
  v += 1;
  memcpy(rw + 64, &v, 8);
  memset(rw + 128, 0x5A, 64);
  size_t differ = 0;
  for (size_t i = 0; i < sizeof mem; ++i) {
    if (mem[i] == expected[i]) continue;
    if (differ++ < 16) {
      const long off = (long)i - GUARD;
      const int r = off < 0 ? -1 : (int)(off / (REGION + GUARD));
      printf("memory: byte %zu (%s+%ld) is 0x%02x, want 0x%02x\n", i, r < 0 ? "guard" : kRegionName[r],
             r < 0 ? (long)i : off % (REGION + GUARD), mem[i], expected[i]);
    }
  }
  printf("memory: %zu of %zu bytes differ from what the peer was allowed to write\n", differ, sizeof mem);
  if (differ != 0) ok = 0;
  printf(ok ? "attack_victim: all checks passed\n" : "attack_victim: FAILED\n");
  return ok ? 0 : 1;
}
