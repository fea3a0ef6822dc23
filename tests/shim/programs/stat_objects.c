/* stat_objects: a libibverbs program with objects whose every attribute it
 * knows, for `rocelab stat --json` to be checked against
 * (tests/shim/stat_objects.sh).
 *
 * On the first device: one PD; a completion channel; three CQs (16, 32 and
 * 64 entries asked; the third on the channel and armed); two MRs; an SRQ of
 * 8 WRs with 5 receives posted and its limit armed at 2; RC QPs a and b
 * connected to each other (a's SQ PSN 0x100, b's 0x200; retry_cnt 6,
 * rnr_retry 5, timeout 14, 1024-byte MTU), RC QP c on the SRQ left in INIT,
 * UD QP u in RTS attached to multicast group 239.1.2.3. a sends b four
 * 100-byte SENDs and one 3000-byte RDMA WRITE (seven packets), all
 * completions of a polled, b's four receive completions left in its CQ.
 *
 * Then it prints one line, "expect " and a JSON object with what it knows
 * (the handles and keys the verbs returned it), flushes, and waits until its
 * standard input ends, so the test can ask `rocelab stat` meanwhile. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIE(...)                          \
  do {                                    \
    fprintf(stderr, "stat_objects: ");    \
    fprintf(stderr, __VA_ARGS__);         \
    fprintf(stderr, "\n");                \
    exit(1);                              \
  } while (0)

static union ibv_gid gid;

static struct ibv_qp* make_qp(struct ibv_pd* pd, enum ibv_qp_type t, struct ibv_cq* scq, struct ibv_cq* rcq,
                              struct ibv_srq* srq) {
  struct ibv_qp_init_attr ia = {0};
  ia.qp_type = t;
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.srq = srq;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = srq ? 0 : 8;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.sq_sig_all = 1;
  struct ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (!qp) DIE("create_qp");
  return qp;
}

static void to_init(struct ibv_qp* qp, int ud) {
  struct ibv_qp_attr a = {0};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  if (ud) {
    a.qkey = 0x11111111;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) DIE("UD INIT");
    return;
  }
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) DIE("INIT");
}

static void connect_rc(struct ibv_qp* qp, uint32_t dest, uint32_t rq_psn, uint32_t sq_psn) {
  struct ibv_qp_attr a = {0};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest;
  a.rq_psn = rq_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    DIE("RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = sq_psn;
  a.timeout = 14;
  a.retry_cnt = 6;
  a.rnr_retry = 5;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_MAX_QP_RD_ATOMIC))
    DIE("RTS");
}

static void post_recv(struct ibv_qp* qp, struct ibv_srq* srq, struct ibv_mr* mr, int n) {
  for (int i = 0; i < n; ++i) {
    struct ibv_sge sge = {(uintptr_t)mr->addr + 256u * (unsigned)i, 256, mr->lkey};
    struct ibv_recv_wr wr = {0}, *bad;
    wr.wr_id = (uint64_t)i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad)) DIE("post_recv");
  }
}

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) DIE("no device");
  struct ibv_context* ctx = ibv_open_device(list[0]);
  if (!ctx) DIE("open_device");
  if (ibv_query_gid(ctx, 1, 0, &gid)) DIE("query_gid");
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  if (!pd || !ch) DIE("pd/channel");
  struct ibv_cq* scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  struct ibv_cq* rcq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
  struct ibv_cq* cq3 = ibv_create_cq(ctx, 64, NULL, ch, 0);
  if (!scq || !rcq || !cq3) DIE("create_cq");
  if (ibv_req_notify_cq(cq3, 0)) DIE("req_notify_cq");
  static char buf1[4096] __attribute__((aligned(4096)));
  static char buf2[8192] __attribute__((aligned(4096)));
  int acc1 = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  struct ibv_mr* m1 = ibv_reg_mr(pd, buf1, sizeof buf1, acc1);
  struct ibv_mr* m2 = ibv_reg_mr(pd, buf2, sizeof buf2, IBV_ACCESS_LOCAL_WRITE);
  if (!m1 || !m2) DIE("reg_mr");
  struct ibv_srq_init_attr sia = {0};
  sia.attr.max_wr = 8;
  sia.attr.max_sge = 1;
  struct ibv_srq* srq = ibv_create_srq(pd, &sia);
  if (!srq) DIE("create_srq");
  post_recv(NULL, srq, m2, 5);
  struct ibv_srq_attr sa = {.srq_limit = 2};
  if (ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT)) DIE("modify_srq");
  uint32_t srq_num = 0;
  if (ibv_get_srq_num(srq, &srq_num)) srq_num = 0;  /* a basic SRQ: no number through this verb */
  struct ibv_srq_attr sq_attr;
  if (ibv_query_srq(srq, &sq_attr)) DIE("query_srq");

  struct ibv_qp* a = make_qp(pd, IBV_QPT_RC, scq, rcq, NULL);
  struct ibv_qp* b = make_qp(pd, IBV_QPT_RC, scq, rcq, NULL);
  struct ibv_qp* c = make_qp(pd, IBV_QPT_RC, scq, rcq, srq);
  struct ibv_qp* u = make_qp(pd, IBV_QPT_UD, cq3, cq3, NULL);
  to_init(a, 0);
  to_init(b, 0);
  to_init(c, 0);
  to_init(u, 1);
  post_recv(a, NULL, m2, 3);
  post_recv(b, NULL, m2, 6);
  connect_rc(a, b->qp_num, 0x200, 0x100);
  connect_rc(b, a->qp_num, 0x100, 0x200);
  struct ibv_qp_attr ua = {0};
  ua.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(u, &ua, IBV_QP_STATE)) DIE("UD RTR");
  ua.qp_state = IBV_QPS_RTS;
  ua.sq_psn = 0x300;
  if (ibv_modify_qp(u, &ua, IBV_QP_STATE | IBV_QP_SQ_PSN)) DIE("UD RTS");
  union ibv_gid mgid = {0};
  mgid.raw[10] = mgid.raw[11] = 0xff;
  mgid.raw[12] = 239; mgid.raw[13] = 1; mgid.raw[14] = 2; mgid.raw[15] = 3;
  if (ibv_attach_mcast(u, &mgid, 0)) DIE("attach_mcast");

  /* a -> b: four SENDs of 100 bytes, one WRITE of 3000 into m1. */
  for (int i = 0; i < 5; ++i) {
    struct ibv_sge sge = {(uintptr_t)buf2, i < 4 ? 100 : 3000, m2->lkey};
    struct ibv_send_wr wr = {0}, *bad;
    wr.wr_id = 100 + (uint64_t)i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = i < 4 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
    if (i == 4) {
      wr.wr.rdma.remote_addr = (uintptr_t)buf1;
      wr.wr.rdma.rkey = m1->rkey;
    }
    if (ibv_post_send(a, &wr, &bad)) DIE("post_send");
  }
  int got = 0;
  while (got < 5) {
    struct ibv_wc wc;
    int r = ibv_poll_cq(scq, 1, &wc);
    if (r < 0) DIE("poll_cq");
    if (r == 1) {
      if (wc.status != IBV_WC_SUCCESS) DIE("send completion %d: %s", got, ibv_wc_status_str(wc.status));
      ++got;
    }
  }

  printf("expect {\"address\": \"%u.%u.%u.%u\", \"device\": \"%s\", \"pd\": %u, "
         "\"cqs\": [%d, %d, %d], \"mrs\": [[%u, %u, %" PRIu64 ", %u, %d], [%u, %u, %" PRIu64 ", %u, %d]], "
         "\"srq\": [%u, %u], \"qps\": {\"a\": %u, \"b\": %u, \"c\": %u, \"u\": %u}}\n",
         gid.raw[12], gid.raw[13], gid.raw[14], gid.raw[15], ibv_get_device_name(list[0]), pd->handle,
         scq->cqe, rcq->cqe, cq3->cqe,
         m1->lkey, m1->rkey, (uint64_t)(uintptr_t)m1->addr, (unsigned)m1->length, acc1,
         m2->lkey, m2->rkey, (uint64_t)(uintptr_t)m2->addr, (unsigned)m2->length, IBV_ACCESS_LOCAL_WRITE,
         srq_num, sq_attr.max_wr, a->qp_num, b->qp_num, c->qp_num, u->qp_num);
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
  }
  if (ibv_detach_mcast(u, &mgid, 0)) DIE("detach_mcast");
  ibv_destroy_qp(u);
  ibv_destroy_qp(c);
  ibv_destroy_qp(b);
  ibv_destroy_qp(a);
  ibv_destroy_srq(srq);
  ibv_dereg_mr(m2);
  ibv_dereg_mr(m1);
  ibv_destroy_cq(cq3);
  ibv_destroy_cq(rcq);
  ibv_destroy_cq(scq);
  ibv_destroy_comp_channel(ch);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("stat_objects: closed\n");
  return 0;
}
