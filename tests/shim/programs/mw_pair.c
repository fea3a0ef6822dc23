/* mw_pair: memory windows between two processes, a plain libibverbs program
 * (run under `rocelab run` by tests/shim/CMakeLists.txt, like the rdma-core
 * examples: `mw_pair -p PORT` is the server, `mw_pair -p PORT HOST` the client;
 * QP numbers, GIDs and window keys are exchanged on TCP).
 *
 * The server (the target) binds a type 1 window with ibv_bind_mw over the
 * second half of its buffer (remote read) and a type 2 window with
 * IBV_WR_BIND_MW over the first half (remote write). The client READs through
 * the type 1 window, WRITEs through the type 2 one, then sends a
 * SEND_WITH_INV naming it. The server checks the bytes and the receive
 * (IBV_WC_WITH_INV, invalidated_rkey); the client WRITEs through the
 * invalidated key once more and must get IBV_WC_REM_ACCESS_ERR while the
 * server sees zero bytes changed. Every check failing exits 1. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HALF 4096
#define CHECK(c, ...)                                   \
  do {                                                  \
    if (!(c)) {                                         \
      fprintf(stderr, "mw_pair: FAILED %s: ", #c);      \
      fprintf(stderr, __VA_ARGS__);                     \
      fprintf(stderr, "\n");                            \
      exit(1);                                          \
    }                                                   \
  } while (0)

struct info {
  uint32_t qpn, rkey1, rkey2;
  uint64_t addr;
  union ibv_gid gid;
};

static struct ibv_context* ctx;
static struct ibv_pd* pd;
static struct ibv_cq* cq;
static struct ibv_qp* qp;
static struct ibv_mr* mr;
static unsigned char buf[2 * HALF];

static void xfer(int fd, void* p, size_t n, int out) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = out ? write(fd, (char*)p + done, n - done) : read(fd, (char*)p + done, n - done);
    CHECK(r > 0, "tcp %s", out ? "write" : "read");
    done += (size_t)r;
  }
}

static struct ibv_wc wait_wc(void) {
  struct ibv_wc wc;
  for (long spins = 0; spins < 20000000; ++spins) {
    int n = ibv_poll_cq(cq, 1, &wc);
    CHECK(n >= 0, "ibv_poll_cq");
    if (n == 1) return wc;
    if (spins > 1000) usleep(50);
  }
  CHECK(0, "no completion");
  return wc;
}

static void connect_qp(const struct info* peer) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), "INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer->qpn;
  a.rq_psn = 1;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.dgid = peer->gid;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), "RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 1;
  a.max_rd_atomic = 1;
  CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), "RTS");
}

static void post(enum ibv_wr_opcode op, uint64_t wr_id, void* local, uint32_t len, uint64_t raddr, uint32_t rkey) {
  struct ibv_sge s = {(uintptr_t)local, len, mr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = wr_id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_SEND_WITH_INV) {
    wr.invalidate_rkey = rkey;
  } else {
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
  }
  CHECK(!ibv_post_send(qp, &wr, &bad), "ibv_post_send opcode %d", op);
}

int main(int argc, char** argv) {
  const char* port = NULL;
  const char* host = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-p") && i + 1 < argc) port = argv[++i];
    else host = argv[i];
  }
  CHECK(port != NULL, "usage: mw_pair -p PORT [HOST]");
  const int server = host == NULL;

  struct ibv_device** list = ibv_get_device_list(NULL);
  CHECK(list && list[0], "no device");
  ctx = ibv_open_device(list[0]);
  CHECK(ctx, "ibv_open_device");
  struct ibv_device_attr da;
  CHECK(!ibv_query_device(ctx, &da), "ibv_query_device");
  CHECK(da.max_mw > 0 && (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW), "device without memory windows");
  pd = ibv_alloc_pd(ctx);
  cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  struct ibv_qp_init_attr qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qp = ibv_create_qp(pd, &qa);
  mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  CHECK(pd && cq && qp && mr, "setup");

  struct info me, peer;
  memset(&me, 0, sizeof me);
  me.qpn = qp->qp_num;
  me.addr = (uintptr_t)buf;
  CHECK(!ibv_query_gid(ctx, 1, 0, &me.gid), "ibv_query_gid");

  struct addrinfo hints, *res;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = server ? AI_PASSIVE : 0;
  CHECK(!getaddrinfo(host, port, &hints, &res), "getaddrinfo");
  int fd = socket(res->ai_family, res->ai_socktype, 0);
  CHECK(fd >= 0, "socket");
  if (server) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    CHECK(!bind(fd, res->ai_addr, res->ai_addrlen) && !listen(fd, 1), "listen");
    int c = accept(fd, NULL, NULL);
    CHECK(c >= 0, "accept");
    close(fd);
    fd = c;
  } else {
    CHECK(!connect(fd, res->ai_addr, res->ai_addrlen), "connect");
  }
  freeaddrinfo(res);

  /* 1: QPs */
  xfer(fd, &me, sizeof me, 1);
  xfer(fd, &peer, sizeof peer, 0);
  connect_qp(&peer);
  char token = 0;

  if (server) {
    for (int i = 0; i < HALF; ++i) buf[HALF + i] = (unsigned char)(i * 13 + 5);
    memset(buf, 0xCC, HALF);
    /* type 1: ibv_bind_mw posts the bind and updates mw->rkey */
    struct ibv_mw* mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
    CHECK(mw1, "ibv_alloc_mw type 1");
    struct ibv_mw_bind b;
    memset(&b, 0, sizeof b);
    b.wr_id = 1;
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info.mr = mr;
    b.bind_info.addr = (uintptr_t)buf + HALF;
    b.bind_info.length = HALF;
    b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
    CHECK(!ibv_bind_mw(qp, mw1, &b), "ibv_bind_mw");
    struct ibv_wc wc = wait_wc();
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW, "bind 1: %s", ibv_wc_status_str(wc.status));
    /* type 2: IBV_WR_BIND_MW with an R_Key we choose */
    struct ibv_mw* mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    CHECK(mw2, "ibv_alloc_mw type 2");
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 2;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw2;
    wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
    wr.bind_mw.bind_info.mr = mr;
    wr.bind_mw.bind_info.addr = (uintptr_t)buf;
    wr.bind_mw.bind_info.length = HALF;
    wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
    CHECK(!ibv_post_send(qp, &wr, &bad), "post BIND_MW");
    wc = wait_wc();
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW, "bind 2: %s", ibv_wc_status_str(wc.status));
    const uint32_t rkey2 = wr.bind_mw.rkey;
    /* a receive for the SEND_WITH_INV (its bytes land at the end of the first half) */
    struct ibv_sge rs = {(uintptr_t)buf + HALF - 64, 64, mr->lkey};
    struct ibv_recv_wr rw, *rbad;
    memset(&rw, 0, sizeof rw);
    rw.wr_id = 3;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    CHECK(!ibv_post_recv(qp, &rw, &rbad), "post recv");
    me.rkey1 = mw1->rkey;
    me.rkey2 = rkey2;
    xfer(fd, &me, sizeof me, 1); /* 2: the keys */
    xfer(fd, &token, 1, 0);      /* 3: the client wrote, read and sent */
    wc = wait_wc();
    CHECK(wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV, "recv: %s",
          ibv_wc_status_str(wc.status));
    CHECK((wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == rkey2, "invalidated_rkey 0x%x, want 0x%x",
          wc.invalidated_rkey, rkey2);
    CHECK(!memcmp(buf, "written through a type 2 window", 32), "WRITE bytes");
    printf("server: type 2 window write landed; SEND_WITH_INV invalidated rkey 0x%08x\n", rkey2);
    unsigned char snapshot[HALF];
    memcpy(snapshot, buf, HALF);
    xfer(fd, &token, 1, 1); /* 4: try the invalidated key */
    xfer(fd, &token, 1, 0); /* 5: it failed */
    CHECK(!memcmp(snapshot, buf, HALF), "bytes changed through an invalidated key");
    struct ibv_qp_attr qattr;
    struct ibv_qp_init_attr qinit;
    CHECK(!ibv_query_qp(qp, &qattr, IBV_QP_STATE, &qinit) && qattr.qp_state == IBV_QPS_ERR,
          "server QP state %d after the access error", qattr.qp_state);
    printf("server: access through the invalidated key changed 0 bytes; QP in ERR\n");
    CHECK(!ibv_destroy_qp(qp) && !ibv_dealloc_mw(mw1) && !ibv_dealloc_mw(mw2), "teardown");
  } else {
    xfer(fd, &peer, sizeof peer, 0); /* 2 */
    unsigned char* local = buf;
    /* READ through the type 1 window */
    post(IBV_WR_RDMA_READ, 10, local + HALF, HALF, peer.addr + HALF, peer.rkey1);
    struct ibv_wc wc = wait_wc();
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ, "READ: %s", ibv_wc_status_str(wc.status));
    for (int i = 0; i < HALF; ++i) CHECK(local[HALF + i] == (unsigned char)(i * 13 + 5), "READ byte %d", i);
    printf("client: read %d bytes through a type 1 window\n", HALF);
    /* WRITE through the type 2 window */
    memcpy(local, "written through a type 2 window", 32);
    post(IBV_WR_RDMA_WRITE, 11, local, 32, peer.addr, peer.rkey2);
    wc = wait_wc();
    CHECK(wc.status == IBV_WC_SUCCESS, "WRITE: %s", ibv_wc_status_str(wc.status));
    /* SEND_WITH_INV naming the type 2 window */
    post(IBV_WR_SEND_WITH_INV, 12, local, 8, 0, peer.rkey2);
    wc = wait_wc();
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "SEND_WITH_INV: %s", ibv_wc_status_str(wc.status));
    xfer(fd, &token, 1, 1); /* 3 */
    xfer(fd, &token, 1, 0); /* 4 */
    memset(local, 0x77, 64);
    post(IBV_WR_RDMA_WRITE, 13, local, 64, peer.addr, peer.rkey2);
    wc = wait_wc();
    CHECK(wc.status == IBV_WC_REM_ACCESS_ERR, "WRITE through the invalidated key: %s", ibv_wc_status_str(wc.status));
    printf("client: WRITE through the invalidated key: %s\n", ibv_wc_status_str(wc.status));
    xfer(fd, &token, 1, 1); /* 5 */
    CHECK(!ibv_destroy_qp(qp), "teardown");
  }
  close(fd);
  CHECK(!ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) && !ibv_dealloc_pd(pd) && !ibv_close_device(ctx), "close");
  ibv_free_device_list(list);
  printf("mw_pair: all checks passed\n");
  return 0;
}
