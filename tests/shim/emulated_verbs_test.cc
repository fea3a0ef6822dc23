// The emulated side of the shim as a program sees it: libibverbs' API (this
// test links -libverbs and runs with librocelab_verbs.so preloaded, device
// rocelab0 on a free 127.0.0.x). Queries, the errno each invalid call gives
// (what libibverbs and rxe give), completion channels, the extended CQ and QP
// APIs, and data moved between two RC QPs of the device (to its own address).
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// Bounded wait for completions: the engine runs on real sockets, so this is
// a loop count, never a timed assertion.
int poll_n(ibv_cq* cq, int n, ibv_wc* wc) {
  int got = 0;
  for (int spins = 0; got < n && spins < 2'000'000; ++spins) {
    int r = ibv_poll_cq(cq, n - got, wc + got);
    if (r < 0) return r;
    got += r;
    if (r == 0 && spins > 1000) usleep(50);
  }
  return got;
}

class Emulated : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    list_ = ibv_get_device_list(&n);
    ASSERT_NE(list_, nullptr);
    ASSERT_GE(n, 1);
    ASSERT_STREQ(ibv_get_device_name(list_[0]), "rocelab0") << "is the shim preloaded?";
    ctx_ = ibv_open_device(list_[0]);
    ASSERT_NE(ctx_, nullptr) << std::strerror(errno);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
  }
  void TearDown() override {
    if (pd_) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
    if (list_) ibv_free_device_list(list_);
  }

  ibv_qp* rc_qp(ibv_cq* cq) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = 64;
    return ibv_create_qp(pd_, &a);
  }

  // An RC QP on pd with the given CQs (8 WRs, 1 SGE each way).
  static ibv_qp* rc_qp_on(ibv_pd* pd, ibv_cq* scq, ibv_cq* rcq) {
    ibv_qp_init_attr ia{};
    ia.send_cq = scq;
    ia.recv_cq = rcq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    return ibv_create_qp(pd, &ia);
  }
  // Two QPs brought to RTS, each towards the other.
  void connect_pair(ibv_qp* a, ibv_qp* b) {
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    connect(a, b->qp_num);
    connect(b, a->qp_num);
  }

  // RESET -> INIT -> RTR -> RTS towards `peer` on this device's own GID.
  void connect(ibv_qp* qp, uint32_t peer) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
    EXPECT_EQ(qp->state, IBV_QPS_INIT);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer;
    a.rq_psn = 100;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1;
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid), 0);
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                        IBV_QP_MIN_RNR_TIMER), 0);
    EXPECT_EQ(qp->state, IBV_QPS_RTR);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 100;
    a.max_rd_atomic = 1;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), 0);
    EXPECT_EQ(qp->state, IBV_QPS_RTS);
  }

  // An SRQ limit event on the way: `srq` (on pd, receives into rx_mr's first
  // 2 KiB) gets `n` receives and its limit armed at n, so the first message
  // taken fires it; *rx, an RC QP on pd and rx_cq with that SRQ, is connected
  // to *tx, an RC QP of ctx_ on tx_cq, which sends it 16 bytes from `src`.
  void send_to_armed_srq(ibv_pd* pd, ibv_cq* rx_cq, ibv_srq* srq, ibv_mr* rx_mr, uint32_t n,
                         ibv_cq* tx_cq, const ibv_sge& src, ibv_qp** tx, ibv_qp** rx) {
    for (uint64_t i = 0; i < n; ++i) {
      ibv_sge g{reinterpret_cast<uintptr_t>(rx_mr->addr) + 512 * i, 512, rx_mr->lkey};
      ibv_recv_wr r{};
      r.wr_id = i;
      r.sg_list = &g;
      r.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_srq_recv(srq, &r, &bad), 0);
    }
    ibv_srq_attr limit{};
    limit.srq_limit = n;
    ASSERT_EQ(ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT), 0);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = rx_cq;
    ia.srq = srq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 8;
    ia.cap.max_send_sge = 1;
    *rx = ibv_create_qp(pd, &ia);
    *tx = rc_qp(tx_cq);
    ASSERT_NO_FATAL_FAILURE(connect_pair(*tx, *rx));
    ibv_sge s = src;
    ibv_send_wr w{};
    w.sg_list = &s;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(*tx, &w, &bad), 0);
  }

  ibv_device** list_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
};

TEST_F(Emulated, DevicePortGidPkey) {
  ibv_device_attr d;
  ASSERT_EQ(ibv_query_device(ctx_, &d), 0);
  EXPECT_EQ(d.phys_port_cnt, 1);
  EXPECT_EQ(d.node_guid, ibv_get_device_guid(list_[0]));  // one identity, both ways
  ibv_device_attr_ex dx;
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dx), 0);
  EXPECT_EQ(dx.orig_attr.vendor_id, d.vendor_id);

  ibv_port_attr p;
  ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);  // through the context's query_port op
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(p.active_mtu, IBV_MTU_4096);  // lo: 65536 bytes, as rxe derives it
  EXPECT_EQ(ibv_query_port(ctx_, 2, &p), EINVAL);

  ibv_gid gid;
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
  const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  EXPECT_EQ(std::memcmp(gid.raw, v4_prefix, 12), 0);
  EXPECT_EQ(gid.raw[12], 127);
  ibv_gid_entry e;
  ASSERT_EQ(ibv_query_gid_ex(ctx_, 1, 0, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(std::memcmp(e.gid.raw, gid.raw, 16), 0);
  EXPECT_EQ(e.ndev_ifindex, if_nametoindex("lo"));  // the netdev under 127.0.0.x, as rxe names its own
  EXPECT_EQ(ibv_query_gid_ex(ctx_, 1, 1, &e, 0), ENODATA);  // an empty slot
  EXPECT_EQ(ibv_query_gid_ex(ctx_, 1, p.gid_tbl_len, &e, 0), EINVAL);
  std::vector<ibv_gid_entry> table(static_cast<size_t>(p.gid_tbl_len));
  EXPECT_EQ(ibv_query_gid_table(ctx_, table.data(), table.size(), 0), 1);

  __be16 pkey;
  ASSERT_EQ(ibv_query_pkey(ctx_, 1, 0, &pkey), 0);
  EXPECT_EQ(be16toh(pkey), 0xffff);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, htobe16(0xffff)), 0);
}

TEST_F(Emulated, InvalidArgumentsGiveLibibverbsErrno) {
  errno = 0;
  EXPECT_EQ(ibv_create_cq(ctx_, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_create_cq(ctx_, 16, nullptr, nullptr, 5), nullptr);  // one comp vector
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd_, static_cast<ibv_mw_type>(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_xrcd_init_attr xa{};
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xa.fd = -1;
  xa.oflags = O_CREAT | O_TRUNC;  // uverbs knows O_CREAT and O_EXCL only
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &xa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  xa.oflags = O_CREAT;
  xa.fd = 1000000;  // not an open file
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &xa), nullptr);
  EXPECT_EQ(errno, EBADF);

  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_XRC_RECV;  // a target needs an XRC domain: ibv_create_qp_ex
  qa.cap.max_send_wr = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd_, &qa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  qa.qp_type = IBV_QPT_RAW_PACKET;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd_, &qa), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  ibv_qp* qp = rc_qp(cq);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;  // RESET -> RTS is no transition (IBTA 10.3.1)
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
  EXPECT_EQ(qp->state, IBV_QPS_RESET);

  char buf[64];
  ibv_mr* mr = ibv_reg_mr(pd_, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  // Posting in RESET: the send queue opens in RTS, the receive queue in INIT.
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 8, mr->lkey};
  ibv_send_wr swr{};
  swr.wr_id = 7;
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  ibv_send_wr* bad_s = nullptr;
  EXPECT_EQ(ibv_post_send(qp, &swr, &bad_s), EINVAL);
  EXPECT_EQ(bad_s, &swr);
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  EXPECT_EQ(ibv_post_recv(qp, &rwr, &bad_r), EINVAL);
  EXPECT_EQ(bad_r, &rwr);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);  // the MR and QP still use it
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST_F(Emulated, RcSendThroughCompletionChannel) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ibv_cq* scq = ibv_create_cq(ctx_, 16, this, ch, 0);
  ibv_cq* rcq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(scq, nullptr);
  ASSERT_NE(rcq, nullptr);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY);  // a CQ uses it

  ibv_qp_init_attr ia{};
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* a = ibv_create_qp(pd_, &ia);
  ibv_qp* b = ibv_create_qp(pd_, &ia);
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, b));

  std::vector<uint8_t> src(4096), dst(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  ibv_mr* smr = ibv_reg_mr(pd_, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = ibv_reg_mr(pd_, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(smr, nullptr);
  ASSERT_NE(dmr, nullptr);

  // Non-blocking channel with nothing pending: EAGAIN, like a kernel channel.
  int flags = fcntl(ch->fd, F_GETFL);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, flags), 0);

  ibv_sge rs{reinterpret_cast<uintptr_t>(dst.data()), 4096, dmr->lkey};
  ibv_recv_wr rwr{}, *bad_r = nullptr;
  rwr.wr_id = 7;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b, &rwr, &bad_r), 0);
  ASSERT_EQ(ibv_req_notify_cq(scq, 0), 0);
  ibv_sge ss{reinterpret_cast<uintptr_t>(src.data()), 4096, smr->lkey};
  ibv_send_wr swr{}, *bad_s = nullptr;
  swr.wr_id = 9;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(ibv_post_send(a, &swr, &bad_s), 0);

  // Blocks until the ACK came back: the device's helper thread makes the
  // progress while this thread sleeps. The fd is pollable first.
  pollfd pfd{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 30'000), 1);
  ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, scq);
  EXPECT_EQ(ev_ctx, this);
  ibv_ack_cq_events(scq, 1);
  ibv_wc wc[2];
  ASSERT_EQ(poll_n(scq, 1, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(wc[0].wr_id, 9u);
  ASSERT_EQ(poll_n(rcq, 1, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wc[0].byte_len, 4096u);
  EXPECT_EQ(wc[0].qp_num, b->qp_num);
  EXPECT_EQ(dst, src);

  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(ibv_dereg_mr(dmr), 0);
  EXPECT_EQ(ibv_destroy_cq(scq), 0);
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(Emulated, ExtendedQpAndCqApis) {
  ibv_cq_init_attr_ex cx{};
  cx.cqe = 16;
  cx.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &cx);
  ASSERT_NE(cq, nullptr);
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cq, &pa), ENOENT);  // empty

  ibv_qp_init_attr_ex qx{};
  qx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qx.pd = pd_;
  qx.send_cq = qx.recv_cq = ibv_cq_ex_to_cq(cq);
  qx.qp_type = IBV_QPT_RC;
  qx.cap.max_send_wr = qx.cap.max_recv_wr = 8;
  qx.cap.max_send_sge = qx.cap.max_recv_sge = 1;
  qx.cap.max_inline_data = 64;
  qx.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
  ibv_qp* a = ibv_create_qp_ex(ctx_, &qx);
  ASSERT_NE(a, nullptr) << std::strerror(errno);
  ibv_qp* b = rc_qp(ibv_cq_ex_to_cq(cq));
  ASSERT_NE(b, nullptr);
  connect(a, b->qp_num);
  connect(b, a->qp_num);

  std::vector<uint8_t> dst(64, 0);
  ibv_mr* dmr = ibv_reg_mr(pd_, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(dmr, nullptr);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(a);
  ASSERT_NE(x, nullptr);
  char text[] = "written inline through ibv_wr_*";
  ibv_wr_start(x);
  x->wr_id = 42;
  x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_wr_rdma_write(x, dmr->rkey, reinterpret_cast<uintptr_t>(dst.data()));
  ibv_wr_set_inline_data(x, text, sizeof text);
  std::memset(text, 'X', sizeof text - 1);  // inline data was copied when set
  ASSERT_EQ(ibv_wr_complete(x), 0);

  int spins = 0;
  int rc;
  while ((rc = ibv_start_poll(cq, &pa)) == ENOENT && ++spins < 2'000'000) {
    if (spins > 1000) usleep(50);
  }
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(cq->wr_id, 42u);
  EXPECT_EQ(cq->status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_wc_read_opcode(cq), IBV_WC_RDMA_WRITE);
  EXPECT_EQ(ibv_wc_read_qp_num(cq), a->qp_num);
  ibv_end_poll(cq);
  EXPECT_STREQ(reinterpret_cast<char*>(dst.data()), "written inline through ibv_wr_*");

  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_dereg_mr(dmr), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

// A parent domain (with a thread domain and allocators) stands for its PD:
// a CQ, QPs and MRs made with it move data; the PD and the thread domain
// cannot go while it exists. The CQ reports a NIC's VLAN and flow-tag fields
// (0: no VLAN on the link, no steering rule); tag matching is refused.
TEST_F(Emulated, ParentDomainStandsForItsPd) {
  ibv_td_init_attr ta{};
  ibv_td* td = ibv_alloc_td(ctx_, &ta);
  ASSERT_NE(td, nullptr) << std::strerror(errno);
  ibv_parent_domain_init_attr pa{};
  pa.pd = pd_;
  pa.td = td;
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pa.alloc = [](ibv_pd*, void*, size_t, size_t, uint64_t) -> void* { return IBV_ALLOCATOR_USE_DEFAULT; };
  pa.free = [](ibv_pd*, void*, void*, uint64_t) {};
  pa.pd_context = this;
  ibv_pd* parent = ibv_alloc_parent_domain(ctx_, &pa);
  ASSERT_NE(parent, nullptr) << std::strerror(errno);
  ibv_parent_domain_init_attr again = pa;
  again.pd = parent;  // a parent domain of a parent domain
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &again), nullptr);
  EXPECT_EQ(errno, EINVAL);

  ibv_cq_init_attr_ex cx{};
  cx.cqe = 16;
  cx.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  cx.parent_domain = pd_;  // an ordinary PD is not a parent domain
  cx.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_CVLAN | IBV_WC_EX_WITH_FLOW_TAG;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &cx), nullptr);
  EXPECT_EQ(errno, EINVAL);
  cx.parent_domain = parent;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &cx);
  ASSERT_NE(cq, nullptr) << std::strerror(errno);
  ibv_cq_init_attr_ex tm = cx;
  tm.wc_flags |= IBV_WC_EX_WITH_TM_INFO;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &tm), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  ibv_qp* a = rc_qp_on(parent, ibv_cq_ex_to_cq(cq), ibv_cq_ex_to_cq(cq));
  ibv_qp* b = rc_qp_on(parent, ibv_cq_ex_to_cq(cq), ibv_cq_ex_to_cq(cq));
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, b));
  EXPECT_EQ(a->pd, parent);
  std::vector<uint8_t> src(256, 0x5A), dst(256, 0);
  ibv_mr* smr = ibv_reg_mr(parent, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = ibv_reg_mr(pd_, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(smr, nullptr);
  ASSERT_NE(dmr, nullptr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), 256, smr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst.data());
  wr.wr.rdma.rkey = dmr->rkey;  // an MR of the parent domain's PD: the same protection domain
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  ibv_poll_cq_attr poll{};
  int rc, spins = 0;
  while ((rc = ibv_start_poll(cq, &poll)) == ENOENT && ++spins < 2'000'000) {
    if (spins > 1000) usleep(50);
  }
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(cq->status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_wc_read_byte_len(cq), 256u);
  EXPECT_EQ(ibv_wc_read_cvlan(cq), 0);
  EXPECT_EQ(ibv_wc_read_flow_tag(cq), 0u);
  ibv_end_poll(cq);
  EXPECT_EQ(dst, src);

  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);  // its parent domain is alive
  EXPECT_EQ(ibv_dealloc_td(td), EBUSY);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(ibv_dereg_mr(dmr), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
}

// Memory windows through libibverbs: a type 1 window bound by ibv_bind_mw, a
// type 2 one by ibv_wr_bind_mw, RDMA WRITEs through both, SEND_WITH_INV
// invalidating the type 2 window (invalidated_rkey in the receive), and a
// WRITE through the invalidated key failing with zero bytes changed.
TEST_F(Emulated, MemoryWindowsBindWriteInvalidate) {
  ibv_device_attr d;
  ASSERT_EQ(ibv_query_device(ctx_, &d), 0);
  EXPECT_GT(d.max_mw, 0);
  EXPECT_TRUE(d.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(d.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);

  ibv_cq* cq = ibv_create_cq(ctx_, 32, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr_ex qx{};
  qx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qx.pd = pd_;
  qx.send_cq = qx.recv_cq = cq;
  qx.qp_type = IBV_QPT_RC;
  qx.cap.max_send_wr = qx.cap.max_recv_wr = 8;
  qx.cap.max_send_sge = qx.cap.max_recv_sge = 1;
  qx.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND;
  ibv_qp* target = ibv_create_qp_ex(ctx_, &qx);  // binds the windows
  ASSERT_NE(target, nullptr) << std::strerror(errno);
  ibv_qp* writer = rc_qp(cq);
  connect_pair(target, writer);

  std::vector<uint8_t> mem(8192, 0xCC), src(4096);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  ibv_mr* mr = ibv_reg_mr(pd_, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  ibv_mr* smr = ibv_reg_mr(pd_, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(mr && smr);
  const uint64_t base = reinterpret_cast<uintptr_t>(mem.data());
  ibv_wc wc[2];
  auto write = [&](uint32_t rkey, uint64_t addr, uint32_t len) {
    ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), len, smr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(writer, &wr, &bad), 0);
    EXPECT_EQ(poll_n(cq, 1, wc), 1);
    return wc[0].status;
  };

  // Type 1: ibv_bind_mw posts the bind; the new R_Key is in mw->rkey at once.
  ibv_mw* mw1 = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
  ASSERT_NE(mw1, nullptr) << std::strerror(errno);
  const uint32_t before = mw1->rkey;
  ibv_mw_bind b{};
  b.wr_id = 11;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info = {mr, base, 4096, IBV_ACCESS_REMOTE_WRITE};
  ASSERT_EQ(ibv_bind_mw(target, mw1, &b), 0);
  EXPECT_EQ(mw1->rkey, ibv_inc_rkey(before));
  ASSERT_EQ(poll_n(cq, 1, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wc[0].wr_id, 11u);
  EXPECT_EQ(write(mw1->rkey, base, 4096), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(mem.data(), src.data(), 4096), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), EBUSY);  // a window is bound to it
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(write(mw1->rkey, base + 8, 8), IBV_WC_SUCCESS);  // the window still works
  EXPECT_EQ(ibv_dealloc_mw(mw1), 0);

  // Type 2 through ibv_qp_ex on the second half.
  ibv_mw* mw2 = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw2, nullptr);
  const uint32_t rkey2 = ibv_inc_rkey(mw2->rkey);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(target);
  ibv_wr_start(x);
  x->wr_id = 12;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_mw_bind_info info{mr, base + 4096, 4096, IBV_ACCESS_REMOTE_WRITE};
  ibv_wr_bind_mw(x, mw2, rkey2, &info);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  ASSERT_EQ(poll_n(cq, 1, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(write(rkey2, base + 4096, 100), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(mem.data() + 4096, src.data(), 100), 0);

  // SEND_WITH_INV from the writer invalidates rkey2 at the target.
  std::vector<uint8_t> rbuf(64);
  ibv_mr* rmr = ibv_reg_mr(pd_, rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(rmr, nullptr);
  ibv_sge rs{reinterpret_cast<uintptr_t>(rbuf.data()), 64, rmr->lkey};
  ibv_recv_wr rw{};
  rw.wr_id = 13;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(target, &rw, &rbad), 0);
  ibv_sge ss{reinterpret_cast<uintptr_t>(src.data()), 8, smr->lkey};
  ibv_send_wr sw{};
  sw.wr_id = 14;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND_WITH_INV;
  sw.send_flags = IBV_SEND_SIGNALED;
  sw.invalidate_rkey = rkey2;
  ibv_send_wr* sbad = nullptr;
  ASSERT_EQ(ibv_post_send(writer, &sw, &sbad), 0);
  ASSERT_EQ(poll_n(cq, 2, wc), 2);
  const ibv_wc& recv = wc[0].wr_id == 13 ? wc[0] : wc[1];
  EXPECT_EQ(recv.status, IBV_WC_SUCCESS);
  EXPECT_EQ(recv.opcode, IBV_WC_RECV);
  EXPECT_TRUE(recv.wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(recv.invalidated_rkey, rkey2);

  // The invalidated key: a remote access error, the memory as it was.
  const std::vector<uint8_t> snapshot = mem;
  EXPECT_EQ(write(rkey2, base + 4096, 100), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(mem, snapshot);

  EXPECT_EQ(ibv_destroy_qp(target), 0);
  EXPECT_EQ(ibv_destroy_qp(writer), 0);
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(ibv_dereg_mr(rmr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// UD: a datagram to our own GID, then the reply addressed by an AH made from
// the receive completion and the GRH area (IPv4 header in bytes 20..39).
TEST_F(Emulated, UdReplyThroughAhFromWc) {
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp[2];
  for (auto& q : qp) {
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_UD;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 16;
    q = ibv_create_qp(pd_, &ia);
    ASSERT_NE(q, nullptr);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = 0x11111111;
    ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }
  std::vector<char> buf(2 * (40 + 64), 0);
  ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  char* rx[2] = {buf.data(), buf.data() + 104};
  for (int i = 0; i < 2; ++i) {
    ibv_sge s{reinterpret_cast<uintptr_t>(rx[i]), 104, mr->lkey};
    ibv_recv_wr r{}, *bad = nullptr;
    r.wr_id = static_cast<uint64_t>(i);
    r.sg_list = &s;
    r.num_sge = 1;
    ASSERT_EQ(ibv_post_recv(qp[i], &r, &bad), 0);
  }
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.hop_limit = 64;
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &aa.grh.dgid), 0);
  ibv_ah* ah = ibv_create_ah(pd_, &aa);
  ASSERT_NE(ah, nullptr);

  char ping[] = "ping", pong[] = "pong";
  auto send = [&](ibv_qp* from, ibv_ah* to, uint32_t qpn, char* text) {
    ibv_sge s{reinterpret_cast<uintptr_t>(text), 5, 0};
    ibv_send_wr w{}, *bad = nullptr;
    w.sg_list = &s;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    w.wr.ud.ah = to;
    w.wr.ud.remote_qpn = qpn;
    w.wr.ud.remote_qkey = 0x11111111;
    return ibv_post_send(from, &w, &bad);
  };
  ASSERT_EQ(send(qp[0], ah, qp[1]->qp_num, ping), 0);
  ibv_wc wc[2];
  ASSERT_EQ(poll_n(cq, 2, wc), 2);  // the send and the receive, in either order
  const ibv_wc& recv = wc[0].opcode == IBV_WC_RECV ? wc[0] : wc[1];
  ASSERT_EQ(recv.status, IBV_WC_SUCCESS);
  EXPECT_EQ(recv.byte_len, 40u + 5u);
  EXPECT_TRUE(recv.wc_flags & IBV_WC_GRH);
  EXPECT_EQ(recv.src_qp, qp[0]->qp_num);
  EXPECT_STREQ(rx[1] + 40, "ping");

  ibv_ah_attr back;
  ASSERT_EQ(ibv_init_ah_from_wc(ctx_, 1, const_cast<ibv_wc*>(&recv),
                                reinterpret_cast<ibv_grh*>(rx[1]), &back), 0);
  EXPECT_EQ(std::memcmp(back.grh.dgid.raw, aa.grh.dgid.raw, 16), 0);  // the sender's GID
  EXPECT_EQ(back.is_global, 1);
  ibv_ah* reply = ibv_create_ah_from_wc(pd_, const_cast<ibv_wc*>(&recv),
                                        reinterpret_cast<ibv_grh*>(rx[1]), 1);
  ASSERT_NE(reply, nullptr);
  ASSERT_EQ(send(qp[1], reply, recv.src_qp, pong), 0);
  ASSERT_EQ(poll_n(cq, 2, wc), 2);
  EXPECT_STREQ(rx[0] + 40, "pong");

  EXPECT_EQ(ibv_destroy_ah(reply), 0);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  for (auto* q : qp) EXPECT_EQ(ibv_destroy_qp(q), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(Emulated, AsyncEventsThroughARealFd) {
  ASSERT_GE(ctx_->async_fd, 0);
  int flags = fcntl(ctx_->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  // The port came up when the device started (as a NIC reports it).
  pollfd pfd{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 0), 1);
  ibv_async_event ev;
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE);
  EXPECT_EQ(ev.element.port_num, 1);
  ibv_ack_async_event(&ev);
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(ctx_, &ev), -1);  // nothing else queued
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags), 0);
}

std::string read_all(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (!f) return std::string("error: ") + std::strerror(errno);
  char buf[256];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  return std::string(buf, n);
}

// The files a program finds for rxe, found for rocelab0 (device_files.h):
// the uverbs node is a character device it may read and write, the port's
// GID attributes give the type and netdev of GID 0, empty GIDs have none.
TEST_F(Emulated, DeviceFilesAsForSoftRoce) {
  const std::string node = std::string("/dev/infiniband/") + ctx_->device->dev_name;
  struct stat st {};
  ASSERT_EQ(stat(node.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(access(node.c_str(), R_OK | W_OK), 0);
  const int fd = open(node.c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);

  const std::string sys = std::string("/sys/class/infiniband/") + ibv_get_device_name(ctx_->device);
  ASSERT_EQ(stat(sys.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  const std::string attrs = sys + "/ports/1/gid_attrs";
  EXPECT_EQ(read_all((attrs + "/types/0").c_str()), "RoCE v2\n");
  EXPECT_EQ(read_all((attrs + "/ndevs/0").c_str()), "lo\n");  // the device sits on a 127.0.0.x
  EXPECT_EQ(stat((attrs + "/types/0").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8);
  errno = 0;
  EXPECT_EQ(stat((attrs + "/types/1").c_str(), &st), -1);  // GID 1 is empty
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_EQ(open((attrs + "/types/0").c_str(), O_WRONLY), -1);
  EXPECT_EQ(errno, EACCES);
  errno = 0;
  EXPECT_EQ(access((sys + "/ports/2").c_str(), F_OK), -1);  // one port
  EXPECT_EQ(errno, ENOENT);
  // Another name is not ours: libc answers (no such device here).
  EXPECT_EQ(stat("/dev/infiniband/uverbs-not-rocelab", &st), -1);
}

// The device's address as a program finds a NIC's: on an interface that
// getifaddrs lists, up and not loopback (device_netifs.h), as libfabric's
// verbs provider looks for it; libc's own entries are unchanged.
TEST_F(Emulated, DeviceAddressIsOnAnInterface) {
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
  const uint8_t* v4 = gid.raw + 12;  // ::ffff:127.0.0.x
  ASSERT_EQ(v4[0], 127);
  for (int round = 0; round < 2; ++round) {  // the same answer again, after freeifaddrs
    ifaddrs* list = nullptr;
    ASSERT_EQ(getifaddrs(&list), 0);
    int device_entries = 0;
    bool lo_is_loopback = false;
    for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      const auto* m = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask);
      if (a->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && (i->ifa_flags & IFF_LOOPBACK)) lo_is_loopback = true;
      if (std::memcmp(&a->sin_addr, v4, 4) != 0 || (i->ifa_flags & IFF_LOOPBACK)) continue;
      ++device_entries;
      EXPECT_STREQ(i->ifa_name, "lo");  // the GID's netdev, as sysfs says
      EXPECT_TRUE(i->ifa_flags & IFF_UP);
      ASSERT_NE(m, nullptr);
      EXPECT_EQ(m->sin_addr.s_addr, 0xFFFFFFFFu);
    }
    freeifaddrs(list);
    EXPECT_EQ(device_entries, 1);
    EXPECT_TRUE(lo_is_loopback);
  }
}

// Every context has its own async fd and events, as every open uverbs file
// has (UCX registers each context's fd with its event loop; Open MPI opens a
// device twice): an SRQ's event on its own context's fd alone, PORT_ACTIVE
// on each.
TEST_F(Emulated, EachContextHasItsOwnAsyncEvents) {
  ibv_context* ctx2 = ibv_open_device(list_[0]);
  ASSERT_NE(ctx2, nullptr);
  ASSERT_NE(ctx2->async_fd, ctx_->async_fd);
  for (ibv_context* c : {ctx_, ctx2}) {
    const int flags = fcntl(c->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(c->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
    ibv_async_event ev{};
    ASSERT_EQ(ibv_get_async_event(c, &ev), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE);
    ibv_ack_async_event(&ev);
    EXPECT_EQ(ibv_get_async_event(c, &ev), -1);
    EXPECT_EQ(errno, EAGAIN);
  }
  ibv_pd* pd2 = ibv_alloc_pd(ctx2);
  ibv_cq* cq2 = ibv_create_cq(ctx2, 16, nullptr, nullptr, 0);
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(pd2 && cq2 && cq);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* srq2 = ibv_create_srq(pd2, &sa);
  ASSERT_NE(srq2, nullptr);
  std::vector<uint8_t> buf(4096, 0);
  ibv_mr* mr2 = ibv_reg_mr(pd2, buf.data(), 2048, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* mr = ibv_reg_mr(pd_, buf.data() + 2048, 2048, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(mr2 && mr);
  ibv_qp* tx = nullptr;
  ibv_qp* rx = nullptr;
  const ibv_sge src{reinterpret_cast<uintptr_t>(buf.data() + 3072), 16, mr->lkey};
  ASSERT_NO_FATAL_FAILURE(send_to_armed_srq(pd2, cq2, srq2, mr2, 2, cq, src, &tx, &rx));
  pollfd pfd{ctx2->async_fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 10'000), 1) << "no SRQ limit event on the SRQ's context";
  pollfd other{ctx_->async_fd, POLLIN, 0};
  EXPECT_EQ(poll(&other, 1, 0), 0) << "the event reached another context";
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx2, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq2);
  ibv_ack_async_event(&ev);
  EXPECT_EQ(ibv_get_async_event(ctx_, &ev), -1);  // nothing for the first context
  EXPECT_EQ(errno, EAGAIN);
  ibv_wc wc[2];
  for (int got = 0, spins = 0; got < 2 && spins < 2'000'000; ++spins)
    got += ibv_poll_cq(cq, 2, wc) + ibv_poll_cq(cq2, 2, wc);
  EXPECT_EQ(ibv_destroy_qp(tx), 0);
  EXPECT_EQ(ibv_destroy_qp(rx), 0);
  EXPECT_EQ(ibv_destroy_srq(srq2), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dereg_mr(mr2), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_cq(cq2), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
  EXPECT_EQ(ibv_close_device(ctx2), 0);
}

// ibv_get_async_event(3): destroying the object an event names waits until
// the event is acknowledged (a program may ack from another thread after it
// has asked for the destroy, as UCX's async thread does).
TEST_F(Emulated, DestroyWaitsForTheAckOfAnEventNamingTheObject) {
  ibv_cq* cq = ibv_create_cq(ctx_, 32, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd_, &sa);
  ASSERT_NE(srq, nullptr);
  std::vector<uint8_t> buf(4096, 0);
  ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_qp* tx = nullptr;
  ibv_qp* rx = nullptr;
  const ibv_sge src{reinterpret_cast<uintptr_t>(buf.data() + 3072), 16, mr->lkey};
  ASSERT_NO_FATAL_FAILURE(send_to_armed_srq(pd_, cq, srq, mr, 4, cq, src, &tx, &rx));

  pollfd pfd{ctx_->async_fd, POLLIN, 0};
  ibv_async_event ev{};
  for (int i = 0; i < 100; ++i) {  // PORT_ACTIVE first, then the SRQ's event
    ASSERT_EQ(poll(&pfd, 1, 10'000), 1) << "no SRQ limit event";
    ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
    if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) break;
    ibv_ack_async_event(&ev);
  }
  ASSERT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  ASSERT_EQ(ev.element.srq, srq);
  ibv_wc wc[4];
  for (int got = 0, spins = 0; got < 2 && spins < 2'000'000; ++spins) got += ibv_poll_cq(cq, 4, wc);
  ASSERT_EQ(ibv_destroy_qp(rx), 0);

  std::atomic<bool> destroyed{false};
  int rc = -1;
  std::thread destroyer([&] {
    rc = ibv_destroy_srq(srq);
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(destroyed.load()) << "ibv_destroy_srq returned before the event was acknowledged";
  ibv_ack_async_event(&ev);
  destroyer.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ibv_destroy_qp(tx), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

}  // namespace

namespace {
// Waits (bounded) for the next event of an armed CQ on ch and acknowledges it.
bool next_event(ibv_comp_channel* ch, ibv_cq* cq) {
  pollfd pfd{ch->fd, POLLIN, 0};
  if (poll(&pfd, 1, 30'000) != 1) return false;
  ibv_cq* ev = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(ch, &ev, &ev_ctx) != 0 || ev != cq) return false;
  ibv_ack_cq_events(cq, 1);
  return true;
}
}  // namespace

// ibv_import_device on a dup of cmd_fd gives a second context on the same
// "file": it imports the first one's PD and MR by handle, and traffic runs
// between QPs of the two contexts through the imported objects.
TEST_F(Emulated, ImportedContextSharesPdAndMr) {
  const int fd2 = dup(ctx_->cmd_fd);
  ASSERT_GE(fd2, 0);
  ibv_context* ctx2 = ibv_import_device(fd2);
  ASSERT_NE(ctx2, nullptr) << std::strerror(errno);
  EXPECT_EQ(ctx2->device, ctx_->device);
  EXPECT_EQ(ctx2->cmd_fd, fd2);

  ibv_pd* pd2 = ibv_import_pd(ctx2, pd_->handle);
  ASSERT_NE(pd2, nullptr) << std::strerror(errno);
  EXPECT_EQ(pd2->context, ctx2);
  EXPECT_EQ(pd2->handle, pd_->handle);

  std::vector<uint8_t> src(8192), dst(8192, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 1);
  ibv_mr* dmr = ibv_reg_mr(pd_, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(dmr, nullptr);
  ibv_mr* dmr2 = ibv_import_mr(pd2, dmr->handle);
  ASSERT_NE(dmr2, nullptr) << std::strerror(errno);
  EXPECT_EQ(dmr2->context, ctx2);
  EXPECT_EQ(dmr2->pd, pd2);
  EXPECT_EQ(dmr2->lkey, dmr->lkey);
  EXPECT_EQ(dmr2->rkey, dmr->rkey);
  EXPECT_EQ(dmr2->addr, dmr->addr);
  EXPECT_EQ(dmr2->length, dmr->length);
  ibv_mr* smr2 = ibv_reg_mr(pd2, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);  // on the imported PD
  ASSERT_NE(smr2, nullptr);

  // A QP of each context, on each context's own CQ.
  ibv_cq* cq1 = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ibv_cq* cq2 = ibv_create_cq(ctx2, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq1, nullptr);
  ASSERT_NE(cq2, nullptr);
  ibv_qp* a = rc_qp_on(pd2, cq2, cq2);
  ibv_qp* b = rc_qp_on(pd_, cq1, cq1);
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, b));
  EXPECT_EQ(a->context, ctx2);

  // RDMA WRITE from ctx2's QP into the MR ctx_ registered, named by the imported keys.
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(src.size()), smr2->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 77;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dmr2->addr);
  wr.wr.rdma.rkey = dmr2->rkey;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  ibv_wc wc;
  ASSERT_EQ(poll_n(cq2, 1, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(dst, src);

  // Refusals: an unknown handle; a context that does not share the file; fds
  // that are no emulated context's.
  errno = 0;
  EXPECT_EQ(ibv_import_pd(ctx2, 0xdead), nullptr);
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(pd2, 0xdead00), nullptr);
  EXPECT_EQ(errno, ENOENT);
  ibv_context* other = ibv_open_device(list_[0]);
  ASSERT_NE(other, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(other, pd_->handle), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_close_device(other), 0);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(pipefd[0]), nullptr);  // the real libibverbs' answer
  EXPECT_NE(errno, 0);
  close(pipefd[0]);
  close(pipefd[1]);
  EXPECT_EQ(ibv_import_device(-1), nullptr);

  // Unimporting frees only the shells; the objects stay usable through the originals.
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  ibv_unimport_mr(dmr2);
  EXPECT_EQ(ibv_dereg_mr(smr2), 0);
  ibv_unimport_pd(pd2);
  EXPECT_EQ(ibv_dereg_mr(dmr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq1), 0);
  EXPECT_EQ(ibv_destroy_cq(cq2), 0);
  EXPECT_EQ(ibv_close_device(ctx2), 0);
  EXPECT_EQ(fcntl(fd2, F_GETFD), -1);  // the imported context owned the dup
}

// ibv_resize_cq grows past the completions held and shrinks down to them,
// losing none and keeping their order; below them it is EINVAL.
TEST_F(Emulated, ResizeCqKeepsEveryCompletion) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ibv_cq* scq = ibv_create_cq(ctx_, 2, nullptr, ch, 0);
  ibv_cq* rcq = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
  ASSERT_NE(scq, nullptr);
  ASSERT_NE(rcq, nullptr);
  ibv_qp* a = rc_qp_on(pd_, scq, rcq);
  ibv_qp* b = rc_qp_on(pd_, scq, rcq);
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, b));
  // Zero-byte SENDs: each completion is in scq once its event fired.
  auto send = [&](uint64_t id) {
    ibv_recv_wr r{}, *bad_r = nullptr;
    r.wr_id = id;
    ASSERT_EQ(ibv_post_recv(b, &r, &bad_r), 0);
    ASSERT_EQ(ibv_req_notify_cq(scq, 0), 0);
    ibv_send_wr s{}, *bad_s = nullptr;
    s.wr_id = id;
    s.opcode = IBV_WR_SEND;
    s.send_flags = IBV_SEND_SIGNALED;
    ASSERT_EQ(ibv_post_send(a, &s, &bad_s), 0);
    ASSERT_TRUE(next_event(ch, scq)) << "no completion for " << id;
  };
  send(0);
  send(1);  // scq (2 entries) is full now
  EXPECT_EQ(ibv_resize_cq(scq, 1), EINVAL);
  ASSERT_EQ(ibv_resize_cq(scq, 64), 0);
  EXPECT_GE(scq->cqe, 64);
  for (uint64_t id = 2; id < 6; ++id) send(id);  // more than the old size
  ASSERT_EQ(ibv_resize_cq(scq, 6), 0);           // down to exactly what it holds
  EXPECT_EQ(scq->cqe, 6);
  ibv_wc wc[8];
  ASSERT_EQ(poll_n(scq, 6, wc), 6);
  for (uint64_t id = 0; id < 6; ++id) {
    EXPECT_EQ(wc[id].wr_id, id);
    EXPECT_EQ(wc[id].status, IBV_WC_SUCCESS);
  }
  EXPECT_EQ(ibv_poll_cq(scq, 8, wc), 0);
  EXPECT_EQ(ibv_resize_cq(scq, 0), EINVAL);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_destroy_cq(scq), 0);
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// ibv_rereg_mr moves an MR to other memory with other access: a WRITE through
// the new R_Key lands in the new memory; the old memory is untouched. A bad
// request (no flag) changes nothing.
TEST_F(Emulated, ReregMrChangesTranslationAndAccess) {
  std::vector<uint8_t> src(4096), old_mem(4096, 0), new_mem(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 3 + 5);
  ibv_mr* mr = ibv_reg_mr(pd_, old_mem.data(), old_mem.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* smr = ibv_reg_mr(pd_, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ASSERT_NE(smr, nullptr);
  const uint32_t old_lkey = mr->lkey;
  EXPECT_EQ(ibv_rereg_mr(mr, 0, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(mr->lkey, old_lkey);
  EXPECT_EQ(mr->addr, old_mem.data());
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, nullptr,
                         new_mem.data(), new_mem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  EXPECT_EQ(mr->addr, new_mem.data());
  EXPECT_EQ(mr->length, new_mem.size());
  EXPECT_EQ(mr->pd, pd_);

  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* a = rc_qp(cq);
  ibv_qp* b = rc_qp(cq);
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, b));
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(src.size()), smr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 5;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(new_mem.data());
  wr.wr.rdma.rkey = mr->rkey;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  ibv_wc wc;
  ASSERT_EQ(poll_n(cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(new_mem, src);
  EXPECT_EQ(old_mem, std::vector<uint8_t>(4096, 0));
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
}

// Completion timestamps: the device advertises a 1 GHz, 64-bit clock; a CQ
// created with both timestamp flags stamps each completion between two reads
// of that clock (ibv_query_rt_values_ex), and its wall-clock stamp is the
// real time then.
TEST_F(Emulated, CompletionTimestampsCountTheDeviceClock) {
  ibv_device_attr_ex dx;
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dx), 0);
  EXPECT_EQ(dx.hca_core_clock, 1'000'000u);  // kHz
  EXPECT_EQ(dx.completion_timestamp_mask, UINT64_MAX);

  ibv_cq_init_attr_ex cx{};
  cx.cqe = 16;
  cx.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK |
                IBV_WC_EX_WITH_BYTE_LEN;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx_, &cx);
  ASSERT_NE(cqx, nullptr) << std::strerror(errno);
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
  ibv_qp* a = rc_qp(cq);
  ibv_qp* b = rc_qp(cq);
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, b));

  ibv_values_ex before{}, after{};
  before.comp_mask = after.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  timespec wall_before, wall_after;
  ASSERT_EQ(clock_gettime(CLOCK_REALTIME, &wall_before), 0);
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &before), 0);
  ibv_recv_wr r{}, *bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b, &r, &bad_r), 0);
  ibv_send_wr s{}, *bad_s = nullptr;
  s.opcode = IBV_WR_SEND;
  s.send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(ibv_post_send(a, &s, &bad_s), 0);
  std::vector<uint64_t> ts, wall;
  for (int spins = 0; ts.size() < 2 && spins < 2'000'000; ++spins) {
    ibv_poll_cq_attr pa{};
    if (ibv_start_poll(cqx, &pa) != 0) continue;
    ts.push_back(ibv_wc_read_completion_ts(cqx));
    wall.push_back(ibv_wc_read_completion_wallclock_ns(cqx));
    EXPECT_EQ(cqx->status, IBV_WC_SUCCESS);
    ibv_end_poll(cqx);
  }
  ASSERT_EQ(ts.size(), 2u);  // the RECV and the SEND
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &after), 0);
  ASSERT_EQ(clock_gettime(CLOCK_REALTIME, &wall_after), 0);
  auto ns = [](const timespec& t) { return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_nsec); };
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GE(ts[i], ns(before.raw_clock));
    EXPECT_LE(ts[i], ns(after.raw_clock));
    // The wall-clock stamp lies in the same interval of real time (1 ms of slack
    // for the offset taken when the CQ was made).
    EXPECT_GE(wall[i] + 1'000'000, ns(wall_before));
    EXPECT_LE(wall[i], ns(wall_after) + 1'000'000);
  }
  EXPECT_LE(ts[0], ts[1]);
  before.comp_mask = 1u << 5;  // not a value this device has
  EXPECT_EQ(ibv_query_rt_values_ex(ctx_, &before), EOPNOTSUPP);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

namespace {

// XRC as xsrq_pingpong uses it, in one process: a domain opened through a
// file, an XRC SRQ, a target and an initiator QP of this device talking to
// each other; the message lands in the SRQ the WR names and completes on its
// CQ with the target's QP number.
class EmulatedXrc : public Emulated {
 protected:
  void modify(ibv_qp* qp, ibv_qp_attr& a, int mask) {
    ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0) << "state " << a.qp_state;
  }
  void bring_up(ibv_qp* qp, uint32_t peer, bool target) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = target ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
    ASSERT_NO_FATAL_FAILURE(modify(qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer;
    a.rq_psn = 7;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 5;
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid), 0);
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (target) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    ASSERT_NO_FATAL_FAILURE(modify(qp, a, mask));
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 7;
    mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
    if (!target) mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    ASSERT_NO_FATAL_FAILURE(modify(qp, a, mask));
  }
};

TEST_F(EmulatedXrc, DomainSrqTargetAndInitiator) {
  char path[] = "/tmp/rocelab_xrcd_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ibv_xrcd_init_attr xa{};
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xa.fd = fd;
  xa.oflags = 0;  // no domain for this file yet, and no O_CREAT
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &xa), nullptr);
  EXPECT_EQ(errno, EAGAIN);
  xa.oflags = O_CREAT;
  ibv_xrcd* xrcd = ibv_open_xrcd(ctx_, &xa);
  ASSERT_NE(xrcd, nullptr) << std::strerror(errno);
  EXPECT_EQ(xrcd->context, ctx_);
  ibv_xrcd* again = ibv_open_xrcd(ctx_, &xa);  // the same file: the same domain
  ASSERT_NE(again, nullptr);
  xa.oflags = O_CREAT | O_EXCL;
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &xa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD;  // OFLAGS missing
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &xa), nullptr);
  EXPECT_EQ(errno, EINVAL);

  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ibv_cq* scq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(cq && scq);
  ibv_srq_init_attr_ex sa{};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
  sa.srq_type = IBV_SRQT_XRC;
  sa.xrcd = again;  // either handle names the domain
  sa.cq = cq;
  sa.pd = pd_;
  ibv_srq* srq = ibv_create_srq_ex(ctx_, &sa);
  ASSERT_NE(srq, nullptr) << std::strerror(errno);
  uint32_t srqn = 0;
  ASSERT_EQ(ibv_get_srq_num(srq, &srqn), 0);
  EXPECT_NE(srqn, 0u);
  ibv_srq_init_attr_ex bad = sa;
  bad.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;  // XRC without domain and CQ
  errno = 0;
  EXPECT_EQ(ibv_create_srq_ex(ctx_, &bad), nullptr);
  EXPECT_EQ(errno, EINVAL);
  bad.srq_type = IBV_SRQT_TM;
  errno = 0;
  EXPECT_EQ(ibv_create_srq_ex(ctx_, &bad), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  ibv_qp_init_attr_ex ta{};
  ta.qp_type = IBV_QPT_XRC_RECV;
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(ctx_, &ta), nullptr);  // no domain
  EXPECT_EQ(errno, EINVAL);
  ta.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  ta.xrcd = xrcd;
  ibv_qp* tgt = ibv_create_qp_ex(ctx_, &ta);
  ASSERT_NE(tgt, nullptr) << std::strerror(errno);
  EXPECT_EQ(tgt->pd, nullptr);
  EXPECT_EQ(tgt->qp_type, IBV_QPT_XRC_RECV);
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = IBV_QPT_XRC_SEND;
  ia.send_cq = scq;
  ia.cap.max_send_wr = 4;
  ia.cap.max_send_sge = 1;
  ia.comp_mask = IBV_QP_INIT_ATTR_PD;
  ia.pd = pd_;
  ibv_qp* ini = ibv_create_qp_ex(ctx_, &ia);
  ASSERT_NE(ini, nullptr) << std::strerror(errno);
  ASSERT_NO_FATAL_FAILURE(bring_up(tgt, ini->qp_num, true));
  ASSERT_NO_FATAL_FAILURE(bring_up(ini, tgt->qp_num, false));

  // A second handle on the target (ibv_open_qp); the creator's goes first.
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_CONTEXT;
  oa.qp_num = tgt->qp_num;
  oa.xrcd = xrcd;
  oa.qp_type = IBV_QPT_XRC_RECV;
  oa.qp_context = this;
  ibv_qp* opened = ibv_open_qp(ctx_, &oa);
  ASSERT_NE(opened, nullptr) << std::strerror(errno);
  EXPECT_EQ(opened->qp_num, tgt->qp_num);
  EXPECT_EQ(opened->qp_context, this);
  oa.qp_num = ini->qp_num;  // not a target
  errno = 0;
  EXPECT_EQ(ibv_open_qp(ctx_, &oa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  const uint32_t tgt_qpn = tgt->qp_num;
  EXPECT_EQ(ibv_destroy_qp(tgt), 0);

  std::vector<uint8_t> src(3000), dst(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 1);
  ibv_mr* smr = ibv_reg_mr(pd_, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = ibv_reg_mr(pd_, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(smr && dmr);
  ibv_sge rs{reinterpret_cast<uintptr_t>(dst.data()), 4096, dmr->lkey};
  ibv_recv_wr rwr{}, *bad_r = nullptr;
  rwr.wr_id = 5;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_srq_recv(srq, &rwr, &bad_r), 0);
  ASSERT_EQ(ibv_post_srq_recv(srq, &rwr, &bad_r), 0);
  ibv_sge ss{reinterpret_cast<uintptr_t>(src.data()), 3000, smr->lkey};
  ibv_send_wr swr{}, *bad_s = nullptr;
  swr.wr_id = 6;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  swr.qp_type.xrc.remote_srqn = srqn;
  ASSERT_EQ(ibv_post_send(ini, &swr, &bad_s), 0);
  ibv_wc wc[2];
  ASSERT_EQ(poll_n(scq, 1, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  ASSERT_EQ(poll_n(cq, 1, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].wr_id, 5u);
  EXPECT_EQ(wc[0].byte_len, 3000u);
  EXPECT_EQ(wc[0].qp_num, tgt_qpn);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 3000), 0);

  // The same through the ibv_wr_* API (ibv_wr_set_xrc_srqn).
  std::fill(dst.begin(), dst.end(), 0);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(ini);
  ASSERT_NE(qx, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 8;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_xrc_srqn(qx, srqn);
  ibv_wr_set_sge(qx, smr->lkey, reinterpret_cast<uintptr_t>(src.data()), 100);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  ASSERT_EQ(poll_n(scq, 1, wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].wr_id, 8u);
  ASSERT_EQ(poll_n(cq, 1, wc), 1);
  EXPECT_EQ(wc[0].byte_len, 100u);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 100), 0);

  EXPECT_EQ(ibv_close_xrcd(xrcd), 0);         // one of two opens
  EXPECT_EQ(ibv_close_xrcd(again), EBUSY);    // the last, while its SRQ and target live
  EXPECT_EQ(ibv_destroy_qp(ini), 0);
  EXPECT_EQ(ibv_destroy_qp(opened), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_close_xrcd(again), 0);
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(ibv_dereg_mr(dmr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_cq(scq), 0);
  close(fd);
  unlink(path);
}

}  // namespace
