/*
 * A verbs program that is still using its device while the process exits.
 *
 *   exit_teardown handler   main() does one RDMA WRITE and returns; an atexit
 *                           handler registered before the device was
 *                           opened posts another WRITE, waits for its
 *                           completion, checks the bytes, and tears everything
 *                           down (each verb must return 0); exit status 0
 *   exit_teardown thread    a second thread calls exit(7) while main() keeps
 *                           registering and deregistering memory and posting
 *                           WRITEs (as rping's client does when its CM thread
 *                           exits on a REJECT); the exit status must be 7
 *
 * One RC QP connected to itself on the first device: no peer is needed.
 */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kHalf = 4096 };

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static unsigned char buf[2 * kHalf];

static void die(const char *what) {
  fprintf(stderr, "exit_teardown: %s failed\n", what);
  _exit(1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void open_self_connected_qp(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0) die("ibv_get_device_list");
  ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) die("ibv_open_device");
  if (!(pd = ibv_alloc_pd(ctx))) die("ibv_alloc_pd");
  mr = ibv_reg_mr(pd, buf, sizeof buf,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr) die("ibv_reg_mr");
  if (!(cq = ibv_create_cq(ctx, 64, NULL, NULL, 0))) die("ibv_create_cq");
  struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 32, .max_recv_wr = 1,
                                        .max_send_sge = 1, .max_recv_sge = 1}};
  if (!(qp = ibv_create_qp(pd, &ia))) die("ibv_create_qp");
  struct ibv_port_attr port;
  union ibv_gid gid;
  if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, 0, &gid)) die("ibv_query_port/gid");

  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("modify to INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = port.active_mtu;
  a.dest_qp_num = qp->qp_num;
  a.rq_psn = 100;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("modify to RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 100;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
    die("modify to RTS");
}

/* WRITE the first half of buf onto the second; 0 when it completed successfully. */
static int write_and_wait(uint32_t lkey, uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = kHalf, .lkey = lkey};
  struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
  wr.wr.rdma.remote_addr = (uintptr_t)buf + kHalf;
  wr.wr.rdma.rkey = rkey;
  struct ibv_send_wr *bad;
  if (ibv_post_send(qp, &wr, &bad)) return -1;
  struct ibv_wc wc;
  const double limit = now() + 10;
  int got;
  while ((got = ibv_poll_cq(cq, 1, &wc)) == 0 && now() < limit) {
  }
  if (got != 1) return -1;
  return wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

static void teardown_at_exit(void) {
  for (int i = 0; i < kHalf; ++i) buf[i] = (unsigned char)(i * 7 + 3);
  memset(buf + kHalf, 0, kHalf);
  if (write_and_wait(mr->lkey, mr->rkey)) die("a WRITE posted at exit");
  if (memcmp(buf, buf + kHalf, kHalf) != 0) die("the bytes of the WRITE at exit");
  if (ibv_destroy_qp(qp)) die("ibv_destroy_qp at exit");
  if (ibv_destroy_cq(cq)) die("ibv_destroy_cq at exit");
  if (ibv_dereg_mr(mr)) die("ibv_dereg_mr at exit");
  if (ibv_dealloc_pd(pd)) die("ibv_dealloc_pd at exit");
  if (ibv_close_device(ctx)) die("ibv_close_device at exit");
  printf("exit_teardown: WRITE at exit completed with the right bytes; teardown returned 0\n");
  fflush(stdout);
}

static void *exit_soon(void *arg) {
  (void)arg;
  usleep(100 * 1000);
  exit(7);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: exit_teardown handler|thread\n");
    return 2;
  }
  if (strcmp(argv[1], "handler") == 0) {
    /* Registered before the device exists: runs after whatever the verbs
       library registers for its own exit. */
    atexit(teardown_at_exit);
    open_self_connected_qp();
    if (write_and_wait(mr->lkey, mr->rkey)) die("a WRITE before exit");
    return 0;
  }
  if (strcmp(argv[1], "thread") != 0) return 2;
  open_self_connected_qp();
  pthread_t t;
  if (pthread_create(&t, NULL, exit_soon, NULL)) die("pthread_create");
  for (unsigned long i = 0;; ++i) {
    struct ibv_mr *m = ibv_reg_mr(pd, buf, sizeof buf,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!m) die("ibv_reg_mr while another thread exits");
    if (write_and_wait(m->lkey, m->rkey)) die("a WRITE while another thread exits");
    if (ibv_dereg_mr(m)) die("ibv_dereg_mr while another thread exits");
  }
}
