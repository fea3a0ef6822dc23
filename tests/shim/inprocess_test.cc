// Never a crash: every op slot of an emulated context, and
// the exported verbs a program can hand an emulated object, called with edge
// arguments — NULL where a pointer is optional, zero and out-of-range sizes,
// objects of another device, verbs the emulator lacks — answer with an errno,
// an error return or NULL, never a signal. This program links the shim's code
// itself (rocelab_verbs_inprocess) ahead of libibverbs, which is what
// preloading does, so it runs under ASan/UBSan in `make test`.
#include <fcntl.h>
#include <poll.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "verbs_shim/shim_objects.h"
#include "verbs_shim/sibling.h"

// libibverbs' private export (IBVERBS_PRIVATE_34) that providers and
// librdmacm call; the shim exports it too. `type` is the sysfs spelling.
extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                  int* type);

namespace {

// Two emulated devices, chosen before the shim reads its configuration.
const bool kEnv = [] {
  setenv("ROCELAB_DEVICES", "rocelab0,rocelab1", 1);
  unsetenv("ROCELAB_PCAP");
  unsetenv("ROCELAB_EVENTS");
  return true;
}();

class NeverACrash : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kEnv);
    int n = 0;
    list_ = ibv_get_device_list(&n);
    ASSERT_NE(list_, nullptr);
    ASSERT_GE(n, 2);
    ASSERT_STREQ(ibv_get_device_name(list_[0]), "rocelab0");
    ctx_ = ibv_open_device(list_[0]);
    other_ = ibv_open_device(list_[1]);
    ASSERT_NE(ctx_, nullptr);
    ASSERT_NE(other_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    other_pd_ = ibv_alloc_pd(other_);
    cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    other_cq_ = ibv_create_cq(other_, 16, nullptr, nullptr, 0);
    ASSERT_TRUE(pd_ && other_pd_ && cq_ && other_cq_);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    qp_ = ibv_create_qp(pd_, &a);
    ASSERT_NE(qp_, nullptr);
    mr_ = ibv_reg_mr(pd_, buf_, sizeof buf_, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr_, nullptr);
  }
  void TearDown() override {
    if (mr_) {
      EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    }
    if (qp_) {
      EXPECT_EQ(ibv_destroy_qp(qp_), 0);
    }
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (other_cq_) {
      EXPECT_EQ(ibv_destroy_cq(other_cq_), 0);
    }
    if (pd_) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (other_pd_) {
      EXPECT_EQ(ibv_dealloc_pd(other_pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
    if (other_) {
      EXPECT_EQ(ibv_close_device(other_), 0);
    }
    if (list_) ibv_free_device_list(list_);
  }
  verbs_context* vctx() { return verbs_get_ctx(ctx_); }

  ibv_device** list_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_context* other_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_pd* other_pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_cq* other_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  char buf_[256] = {};
};

// A NULL result must come with an errno.
#define EXPECT_NULL_ERRNO(call)                  \
  do {                                           \
    errno = 0;                                   \
    EXPECT_EQ((call), nullptr) << #call;         \
    EXPECT_NE(errno, 0) << #call << " set no errno"; \
  } while (0)

// The memory-window slots with edge arguments: an errno, never a signal.
TEST_F(NeverACrash, MemoryWindowSlotsRefuseEdgeArguments) {
  ibv_context_ops& ops = ctx_->ops;
  errno = 0;
  EXPECT_EQ(ops.alloc_mw(pd_, static_cast<ibv_mw_type>(7)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NULL_ERRNO(ops.alloc_mw(nullptr, IBV_MW_TYPE_1));
  EXPECT_EQ(ops.bind_mw(qp_, nullptr, nullptr), EINVAL);
  EXPECT_EQ(ops.dealloc_mw(nullptr), EINVAL);
  ibv_mw* mw = ops.alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ibv_mw_bind b{};
  b.bind_info.mr = mr_;
  b.bind_info.addr = reinterpret_cast<uintptr_t>(buf_);
  b.bind_info.length = 16;
  EXPECT_EQ(ops.bind_mw(qp_, mw, &b), EINVAL);  // ibv_bind_mw is for type 1 only
  ibv_mw* other_mw = ops.alloc_mw(other_pd_, IBV_MW_TYPE_1);
  ASSERT_NE(other_mw, nullptr);
  EXPECT_EQ(ops.bind_mw(qp_, other_mw, &b), EINVAL);  // a window of another device
  // A bind WR naming no window is refused at post; the QP (RESET) refuses anyway.
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, &wr, &bad), EINVAL);
  EXPECT_EQ(ops.dealloc_mw(mw), 0);
  EXPECT_EQ(other_mw->context->ops.dealloc_mw(other_mw), 0);
}

// Every slot of the context's ops tables for a verb the emulator lacks.
TEST_F(NeverACrash, EveryUnsupportedOpSlotSaysEopnotsupp) {
  verbs_context* v = vctx();
  ASSERT_GE(v->sz, sizeof(verbs_context));
  ibv_sge sge{};
  EXPECT_EQ(v->advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), EOPNOTSUPP);
  EXPECT_NULL_ERRNO(v->alloc_null_mr(pd_));
  EXPECT_EQ(v->read_counters(nullptr, nullptr, 0, 0), EOPNOTSUPP);
  EXPECT_EQ(v->attach_counters_point_flow(nullptr, nullptr, nullptr), EOPNOTSUPP);
  EXPECT_NULL_ERRNO(v->create_counters(ctx_, nullptr));
  EXPECT_EQ(v->destroy_counters(nullptr), EOPNOTSUPP);
  EXPECT_NULL_ERRNO(v->reg_dm_mr(pd_, nullptr, 0, 0, 0));
  EXPECT_NULL_ERRNO(v->alloc_dm(ctx_, nullptr));
  EXPECT_EQ(v->free_dm(nullptr), EOPNOTSUPP);
  EXPECT_EQ(v->modify_flow_action_esp(nullptr, nullptr), EOPNOTSUPP);
  EXPECT_EQ(v->destroy_flow_action(nullptr), EOPNOTSUPP);
  EXPECT_NULL_ERRNO(v->create_flow_action_esp(ctx_, nullptr));
  EXPECT_EQ(v->modify_qp_rate_limit(qp_, nullptr), EOPNOTSUPP);
  EXPECT_NULL_ERRNO(v->alloc_parent_domain(ctx_, nullptr));  // implemented: no attributes is EINVAL
  EXPECT_EQ(v->dealloc_td(nullptr), EINVAL);
  EXPECT_NULL_ERRNO(v->alloc_td(ctx_, nullptr));
  EXPECT_EQ(v->modify_cq(cq_, nullptr), EOPNOTSUPP);
  EXPECT_EQ(v->post_srq_ops(nullptr, nullptr, nullptr), EOPNOTSUPP);
  EXPECT_EQ(v->destroy_rwq_ind_table(nullptr), EOPNOTSUPP);
  EXPECT_NULL_ERRNO(v->create_rwq_ind_table(ctx_, nullptr));
  EXPECT_EQ(v->destroy_wq(nullptr), EOPNOTSUPP);
  EXPECT_EQ(v->modify_wq(nullptr, nullptr), EOPNOTSUPP);
  EXPECT_NULL_ERRNO(v->create_wq(ctx_, nullptr));
  EXPECT_EQ(v->ibv_destroy_flow(nullptr), EOPNOTSUPP);
  EXPECT_NULL_ERRNO(v->ibv_create_flow(qp_, nullptr));
  // (XRC's slots are implemented: XrcSlotsAndObjectsRefuseEdgeArguments.)
  // The exported verbs the emulator lacks.
  // (Multicast is implemented: edge arguments are refused as uverbs refuses them.)
  ibv_gid group{};
  group.raw[0] = 0xff;  // ff00::/8
  EXPECT_EQ(ibv_attach_mcast(qp_, nullptr, 0), EINVAL);
  EXPECT_EQ(ibv_attach_mcast(qp_, reinterpret_cast<ibv_gid*>(buf_), 0), EINVAL);  // not multicast
  EXPECT_EQ(ibv_attach_mcast(qp_, &group, 0), qp_->qp_type == IBV_QPT_UD ? 0 : EINVAL);
  EXPECT_EQ(ibv_detach_mcast(qp_, &group, 0), qp_->qp_type == IBV_QPT_UD ? 0 : EINVAL);
  EXPECT_EQ(ibv_detach_mcast(qp_, &group, 0), EINVAL);  // not attached (any more)
  EXPECT_NULL_ERRNO(ibv_import_dm(ctx_, 1));
  EXPECT_NULL_ERRNO(ibv_reg_dmabuf_mr(pd_, 0, 4096, 0, -1, 0));
  ibv_ece ece{};
  EXPECT_NE(ibv_query_ece(qp_, &ece), 0);
  EXPECT_NE(ibv_set_ece(qp_, &ece), 0);
}

// The supported verbs with edge arguments.
TEST_F(NeverACrash, QueriesWithEdgeArguments) {
  ibv_device_attr_ex dx;
  EXPECT_EQ(vctx()->query_device_ex(ctx_, nullptr, &dx, sizeof dx), 0);  // input is optional
  EXPECT_EQ(vctx()->query_device_ex(ctx_, nullptr, &dx, 1), EINVAL);    // smaller than any attr
  ibv_query_device_ex_input in{};
  in.comp_mask = 1u << 31;
  EXPECT_NE(vctx()->query_device_ex(ctx_, &in, &dx, sizeof dx), 0);
  ibv_port_attr pa;
  EXPECT_EQ(ibv_query_port(ctx_, 0, &pa), EINVAL);
  EXPECT_EQ(ibv_query_port(ctx_, 2, &pa), EINVAL);
  EXPECT_EQ(ibv_query_port(ctx_, 255, &pa), EINVAL);
  ibv_gid gid;
  EXPECT_NE(ibv_query_gid(ctx_, 1, -1, &gid), 0);
  EXPECT_NE(ibv_query_gid(ctx_, 1, 1 << 20, &gid), 0);
  EXPECT_NE(ibv_query_gid(ctx_, 2, 0, &gid), 0);
  ibv_gid_entry ge;
  EXPECT_NE(ibv_query_gid_ex(ctx_, 1, 1u << 30, &ge, 0), 0);
  EXPECT_NE(ibv_query_gid_ex(ctx_, 9, 0, &ge, 0), 0);
  EXPECT_NE(ibv_query_gid_ex(ctx_, 1, 0, &ge, 1u << 7), 0);  // unknown flag
  ibv_gid_entry table[2];
  EXPECT_LE(ibv_query_gid_table(ctx_, table, 0, 0), 0);   // room for none: nothing, or an error
  EXPECT_LT(ibv_query_gid_table(ctx_, table, 2, 1u << 7), 0);
  __be16 pkey;
  EXPECT_NE(ibv_query_pkey(ctx_, 1, -1, &pkey), 0);
  EXPECT_NE(ibv_query_pkey(ctx_, 1, 1 << 16, &pkey), 0);
  EXPECT_LT(ibv_get_pkey_index(ctx_, 1, htobe16(0x1234)), 0);
  EXPECT_LT(ibv_get_pkey_index(ctx_, 7, htobe16(0xffff)), 0);
  ibv_values_ex values{};
  values.comp_mask = 0;
  EXPECT_EQ(ibv_query_rt_values_ex(ctx_, &values), 0);
}

TEST_F(NeverACrash, CreatesWithEdgeArguments) {
  EXPECT_NULL_ERRNO(ibv_create_cq(ctx_, 0, nullptr, nullptr, 0));
  EXPECT_NULL_ERRNO(ibv_create_cq(ctx_, -1, nullptr, nullptr, 0));
  EXPECT_NULL_ERRNO(ibv_create_cq(ctx_, 1 << 30, nullptr, nullptr, 0));
  EXPECT_NULL_ERRNO(ibv_create_cq(ctx_, 4, nullptr, nullptr, -1));
  ibv_comp_channel* foreign_ch = ibv_create_comp_channel(other_);
  ASSERT_NE(foreign_ch, nullptr);
  EXPECT_NULL_ERRNO(ibv_create_cq(ctx_, 4, nullptr, foreign_ch, 0));  // another device's channel
  EXPECT_EQ(ibv_destroy_comp_channel(foreign_ch), 0);
  ibv_cq_init_attr_ex cx{};
  cx.cqe = 4;
  cx.comp_mask = 1u << 20;
  EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx_, &cx));
  cx.comp_mask = 0;
  cx.wc_flags = 1ull << 40;
  EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx_, &cx));
  cx.wc_flags = 0;
  cx.cqe = 0;
  EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx_, &cx));

  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq_;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ibv_qp_init_attr bad = qa;
  bad.send_cq = nullptr;
  EXPECT_NULL_ERRNO(ibv_create_qp(pd_, &bad));
  bad = qa;
  bad.recv_cq = nullptr;
  EXPECT_NULL_ERRNO(ibv_create_qp(pd_, &bad));
  bad = qa;
  bad.send_cq = other_cq_;  // a CQ of another device
  EXPECT_NULL_ERRNO(ibv_create_qp(pd_, &bad));
  bad = qa;
  bad.qp_type = static_cast<ibv_qp_type>(99);
  EXPECT_NULL_ERRNO(ibv_create_qp(pd_, &bad));
  bad = qa;
  bad.cap.max_send_wr = 1u << 30;
  EXPECT_NULL_ERRNO(ibv_create_qp(pd_, &bad));
  bad = qa;
  bad.cap.max_send_sge = 1u << 20;
  EXPECT_NULL_ERRNO(ibv_create_qp(pd_, &bad));
  bad = qa;
  bad.cap.max_inline_data = 1u << 30;
  EXPECT_NULL_ERRNO(ibv_create_qp(pd_, &bad));
  bad = qa;
  bad.srq = reinterpret_cast<ibv_srq*>(0);  // NULL srq is the optional default
  ibv_qp* ok = ibv_create_qp(pd_, &bad);
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ibv_destroy_qp(ok), 0);
  ibv_qp_init_attr_ex qx{};
  qx.send_cq = qx.recv_cq = cq_;
  qx.qp_type = IBV_QPT_RC;
  qx.cap = qa.cap;
  qx.comp_mask = 0;  // no PD
  EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx_, &qx));
  qx.comp_mask = IBV_QP_INIT_ATTR_PD | (1u << 30);
  qx.pd = pd_;
  EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx_, &qx));
  qx.comp_mask = IBV_QP_INIT_ATTR_PD;
  qx.pd = other_pd_;  // a PD of another device than the context
  EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx_, &qx));

  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 0;
  sa.attr.max_sge = 1;
  EXPECT_NULL_ERRNO(ibv_create_srq(pd_, &sa));
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1u << 20;
  EXPECT_NULL_ERRNO(ibv_create_srq(pd_, &sa));

  EXPECT_NULL_ERRNO(ibv_reg_mr(pd_, buf_, sizeof buf_, 1 << 15));  // unknown access bit
  // An unknown bit of the optional range (20..29) is dropped, as libibverbs does.
  ibv_mr* optional = ibv_reg_mr(pd_, buf_, sizeof buf_, IBV_ACCESS_LOCAL_WRITE | (1 << 29));
  ASSERT_NE(optional, nullptr);
  EXPECT_EQ(ibv_dereg_mr(optional), 0);
  EXPECT_NULL_ERRNO(ibv_reg_mr(pd_, buf_, sizeof buf_, IBV_ACCESS_REMOTE_WRITE));  // needs LOCAL_WRITE
  EXPECT_NULL_ERRNO(ibv_reg_mr(pd_, nullptr, 64, IBV_ACCESS_LOCAL_WRITE));
  EXPECT_NULL_ERRNO(ibv_reg_mr_iova(pd_, buf_, sizeof buf_, UINT64_MAX - 8, IBV_ACCESS_LOCAL_WRITE));
  ibv_mr* empty = ibv_reg_mr(pd_, buf_, 0, IBV_ACCESS_LOCAL_WRITE);  // a zero-length MR is legal
  if (empty) {
    EXPECT_EQ(ibv_dereg_mr(empty), 0);
  }

  ibv_ah_attr ah{};
  ah.port_num = 1;
  EXPECT_NULL_ERRNO(ibv_create_ah(pd_, &ah));  // RoCE needs the GRH
  ah.is_global = 1;
  ah.grh.sgid_index = 200;
  EXPECT_NULL_ERRNO(ibv_create_ah(pd_, &ah));
  ah.grh.sgid_index = 0;
  ah.port_num = 3;
  EXPECT_NULL_ERRNO(ibv_create_ah(pd_, &ah));
  ibv_wc wc{};
  ibv_ah_attr from_wc{};
  EXPECT_NE(ibv_init_ah_from_wc(ctx_, 1, &wc, nullptr, &from_wc), 0);  // no GRH to answer
  EXPECT_NULL_ERRNO(ibv_create_ah_from_wc(pd_, &wc, nullptr, 1));
}

TEST_F(NeverACrash, ModifyPostPollWithEdgeArguments) {
  ibv_qp_attr a{};
  a.qp_state = static_cast<ibv_qp_state>(42);
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE), EINVAL);
  a.qp_state = IBV_QPS_INIT;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | (1 << 30)), EINVAL);
  a.port_num = 9;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            EINVAL);
  EXPECT_EQ(qp_->state, IBV_QPS_RESET);
  ibv_qp_attr q;
  ibv_qp_init_attr qi;
  EXPECT_EQ(ibv_query_qp(qp_, &q, 0, &qi), 0);

  // Posting: an empty list is nothing to do; a QP in RESET takes no send.
  ibv_send_wr* bad_s = nullptr;
  ibv_recv_wr* bad_r = nullptr;
  EXPECT_EQ(ibv_post_send(qp_, nullptr, &bad_s), 0);
  EXPECT_EQ(ibv_post_recv(qp_, nullptr, &bad_r), 0);
  ibv_send_wr s{};
  s.opcode = IBV_WR_SEND;
  EXPECT_NE(ibv_post_send(qp_, &s, &bad_s), 0);
  EXPECT_EQ(bad_s, &s);
  ibv_sge sges[4] = {};
  ibv_recv_wr r{};
  r.sg_list = sges;
  r.num_sge = 4;  // more than max_recv_sge
  EXPECT_NE(ibv_post_recv(qp_, &r, &bad_r), 0);
  r.num_sge = -1;
  EXPECT_NE(ibv_post_recv(qp_, &r, &bad_r), 0);
  a = {};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  ASSERT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  r.num_sge = 0;
  EXPECT_EQ(ibv_post_recv(qp_, &r, &bad_r), 0);  // a zero-SGE receive is legal
  for (int i = 0; i < 8; ++i) ibv_post_recv(qp_, &r, &bad_r);  // past the queue's depth: ENOMEM, no overrun
  EXPECT_NE(ibv_post_recv(qp_, &r, &bad_r), 0);

  ibv_wc wc[4];
  EXPECT_EQ(ibv_poll_cq(cq_, 0, wc), 0);
  EXPECT_LT(ibv_poll_cq(cq_, -1, wc), 0);
  EXPECT_EQ(ibv_req_notify_cq(cq_, 1), 0);
  ibv_ack_cq_events(cq_, 0);
  EXPECT_EQ(ibv_resize_cq(cq_, 0), EINVAL);
  EXPECT_EQ(ibv_resize_cq(cq_, 1 << 30), EINVAL);

  // The extended CQ and QP APIs on an empty CQ and an unused batch.
  ibv_cq_init_attr_ex cx{};
  cx.cqe = 4;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx_, &cx);
  ASSERT_NE(cqx, nullptr);
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cqx, &pa), ENOENT);
  pa.comp_mask = 1;
  EXPECT_NE(ibv_start_poll(cqx, &pa), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp_);
  ASSERT_NE(qpx, nullptr);
  ibv_wr_start(qpx);
  ibv_wr_abort(qpx);
  ibv_wr_start(qpx);
  const int complete = ibv_wr_complete(qpx);  // nothing to post, on a QP not in RTS
  EXPECT_TRUE(complete == 0 || complete == EINVAL) << complete;
  // Busy objects cannot be destroyed; nothing breaks.
  EXPECT_EQ(ibv_destroy_cq(cq_), EBUSY);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);
  // Async events: non-blocking fd with nothing queued but the port event.
  ibv_async_event ev;
  while (true) {
    const int flags = fcntl(ctx_->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
    if (ibv_get_async_event(ctx_, &ev) != 0) break;
    ibv_ack_async_event(&ev);
  }
}

// Bad work requests on a live (self-connected) RC QP, a UD QP, an SRQ and the
// ibv_wr_* API: each is refused with an errno (and bad_wr) or completes in
// error; nothing is written outside the registered memory.
TEST_F(NeverACrash, BadWorkRequestsOnLiveQueues) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
  ASSERT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = qp_->qp_num;  // itself
  a.max_dest_rd_atomic = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = 7;  // a GID slot that is empty
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid), 0);
  const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, rtr), EINVAL);
  a.ah_attr.grh.sgid_index = 0;
  a.path_mtu = static_cast<ibv_mtu>(9);
  EXPECT_EQ(ibv_modify_qp(qp_, &a, rtr), EINVAL);
  a.path_mtu = IBV_MTU_1024;
  ASSERT_EQ(ibv_modify_qp(qp_, &a, rtr), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 40;  // > 31
  a.retry_cnt = 1;
  const int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                  IBV_QP_MAX_QP_RD_ATOMIC;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, rts), EINVAL);
  a.timeout = 10;
  ASSERT_EQ(ibv_modify_qp(qp_, &a, rts), 0);

  ibv_mr* foreign = ibv_reg_mr(other_pd_, buf_, sizeof buf_, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(foreign, nullptr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_), 64, mr_->lkey};
  ibv_send_wr s{}, *bad = nullptr;
  s.sg_list = &sge;
  s.num_sge = 1;
  s.send_flags = IBV_SEND_SIGNALED;
  s.opcode = static_cast<ibv_wr_opcode>(200);  // no such opcode
  EXPECT_NE(ibv_post_send(qp_, &s, &bad), 0);
  EXPECT_EQ(bad, &s);
  s.opcode = IBV_WR_SEND;
  ibv_sge two[2] = {sge, sge};
  s.sg_list = two;
  s.num_sge = 2;  // more than max_send_sge
  EXPECT_NE(ibv_post_send(qp_, &s, &bad), 0);
  s.sg_list = &sge;
  s.num_sge = 1;
  s.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;  // more inline data than max_inline_data (0)
  EXPECT_NE(ibv_post_send(qp_, &s, &bad), 0);
  // Keys the QP may not use complete in error (local protection), not a crash.
  char before[sizeof buf_];
  std::memcpy(before, buf_, sizeof buf_);
  s.send_flags = IBV_SEND_SIGNALED;
  sge.lkey = foreign->lkey;  // another device's MR
  s.opcode = IBV_WR_RDMA_READ;
  s.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf_);
  s.wr.rdma.rkey = 0xdeadbe00;  // no such R_Key
  ASSERT_EQ(ibv_post_send(qp_, &s, &bad), 0);
  ibv_wc wc{};
  int got = 0;
  for (int spins = 0; got == 0 && spins < 2'000'000; ++spins) got = ibv_poll_cq(cq_, 1, &wc);
  ASSERT_EQ(got, 1);
  EXPECT_NE(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(before, buf_, sizeof buf_), 0);
  ibv_qp_attr qa;
  ibv_qp_init_attr qi;
  ASSERT_EQ(ibv_query_qp(qp_, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_ERR);  // an error completion moves the QP to ERR
  EXPECT_EQ(ibv_dereg_mr(foreign), 0);

  // The ibv_wr_* API: an op outside start/complete; inline data over the limit.
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp_);
  ASSERT_NE(qpx, nullptr);
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qpx);  // no wr_start: nothing happens
  EXPECT_NE(ibv_wr_complete(qpx), 0);  // nor a complete without a start
  ibv_wr_start(qpx);
  ibv_wr_send(qpx);
  ibv_wr_set_inline_data(qpx, buf_, sizeof buf_);  // max_inline_data is 0
  EXPECT_NE(ibv_wr_complete(qpx), 0);
  ibv_wr_start(qpx);
  ibv_wr_set_sge(qpx, mr_->lkey, reinterpret_cast<uintptr_t>(buf_), 8);  // before any op
  EXPECT_NE(ibv_wr_complete(qpx), 0);
  ibv_wr_start(qpx);
  ibv_wr_send(qpx);
  ibv_wr_set_sge_list(qpx, 0, nullptr);  // a zero-byte SEND: posted (and flushed: the QP is in ERR)
  EXPECT_EQ(ibv_wr_complete(qpx), 0);

  // An SRQ: a limit above its size, a resize it does not do, too many SGEs.
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd_, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr m{};
  m.srq_limit = 1000;
  EXPECT_NE(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0);
  m.max_wr = 64;
  EXPECT_NE(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), 0);
  EXPECT_NE(ibv_modify_srq(srq, &m, 1 << 7), 0);
  ibv_sge sges[3] = {};
  ibv_recv_wr r{}, *bad_r = nullptr;
  r.sg_list = sges;
  r.num_sge = 3;
  EXPECT_NE(ibv_post_srq_recv(srq, &r, &bad_r), 0);
  EXPECT_EQ(bad_r, &r);
  EXPECT_EQ(ibv_post_srq_recv(srq, nullptr, &bad_r), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);

  // A UD QP: an AH of another device is refused at post.
  ibv_qp_init_attr ua{};
  ua.send_cq = ua.recv_cq = cq_;
  ua.qp_type = IBV_QPT_UD;
  ua.cap.max_send_wr = ua.cap.max_recv_wr = 2;
  ua.cap.max_send_sge = ua.cap.max_recv_sge = 1;
  ibv_qp* ud = ibv_create_qp(pd_, &ua);
  ASSERT_NE(ud, nullptr);
  a = {};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = 0x11111111;
  ASSERT_EQ(ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(ibv_modify_qp(ud, &a, IBV_QP_STATE), 0);
  a.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  ibv_ah_attr ah_attr{};
  ah_attr.is_global = 1;
  ah_attr.port_num = 1;
  ASSERT_EQ(ibv_query_gid(other_, 1, 0, &ah_attr.grh.dgid), 0);
  ibv_ah* other_ah = ibv_create_ah(other_pd_, &ah_attr);
  ASSERT_NE(other_ah, nullptr);
  ibv_send_wr u{};
  sge.lkey = mr_->lkey;
  u.sg_list = &sge;
  u.num_sge = 1;
  u.opcode = IBV_WR_SEND;
  u.wr.ud.ah = other_ah;
  u.wr.ud.remote_qpn = 1234;
  u.wr.ud.remote_qkey = 0x11111111;
  EXPECT_NE(ibv_post_send(ud, &u, &bad), 0);
  u.opcode = IBV_WR_RDMA_WRITE;  // not a UD operation
  EXPECT_NE(ibv_post_send(ud, &u, &bad), 0);
  EXPECT_EQ(ibv_destroy_ah(other_ah), 0);
  EXPECT_EQ(ibv_destroy_qp(ud), 0);
  // Rereg into another device's PD: refused, the MR unchanged.
  const uint32_t lkey = mr_->lkey;
  EXPECT_EQ(ibv_rereg_mr(mr_, IBV_REREG_MR_CHANGE_PD, other_pd_, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(mr_->lkey, lkey);
  EXPECT_EQ(ibv_rereg_mr(mr_, 1 << 8, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  // A non-blocking completion channel with nothing to report.
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// The XRC slots (open_xrcd, close_xrcd, create_srq_ex, get_srq_num, open_qp,
// create_qp_ex with XRC types) and the XRC objects with edge arguments: NULL
// attributes, missing comp_mask bits, objects of the other device, queues an
// XRC QP does not have.
TEST_F(NeverACrash, XrcSlotsAndObjectsRefuseEdgeArguments) {
  verbs_context* v = vctx();
  EXPECT_NULL_ERRNO(v->open_xrcd(ctx_, nullptr));
  ibv_xrcd_init_attr xa{};
  EXPECT_NULL_ERRNO(v->open_xrcd(ctx_, &xa));  // comp_mask 0
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS | (1u << 7);
  xa.fd = -1;
  EXPECT_NULL_ERRNO(v->open_xrcd(ctx_, &xa));  // an unknown bit
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xa.fd = -2;  // neither -1 nor a file
  EXPECT_NULL_ERRNO(v->open_xrcd(ctx_, &xa));
  xa.fd = -1;
  ibv_xrcd* xrcd = v->open_xrcd(ctx_, &xa);
  ibv_xrcd* other_xrcd = verbs_get_ctx(other_)->open_xrcd(other_, &xa);
  ASSERT_TRUE(xrcd && other_xrcd);
  EXPECT_EQ(v->close_xrcd(nullptr), EINVAL);

  EXPECT_NULL_ERRNO(v->create_srq_ex(ctx_, nullptr));
  ibv_srq_init_attr_ex sa{};
  EXPECT_NULL_ERRNO(v->create_srq_ex(ctx_, &sa));  // no PD
  sa.attr.max_wr = 2;
  sa.attr.max_sge = 1;
  sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  sa.srq_type = IBV_SRQT_XRC;
  sa.pd = pd_;
  sa.xrcd = other_xrcd;  // another device's domain
  sa.cq = cq_;
  EXPECT_NULL_ERRNO(v->create_srq_ex(ctx_, &sa));
  sa.xrcd = xrcd;
  sa.cq = other_cq_;  // another device's CQ
  EXPECT_NULL_ERRNO(v->create_srq_ex(ctx_, &sa));
  sa.cq = nullptr;
  EXPECT_NULL_ERRNO(v->create_srq_ex(ctx_, &sa));
  sa.cq = cq_;
  sa.pd = other_pd_;
  EXPECT_NULL_ERRNO(v->create_srq_ex(ctx_, &sa));
  sa.pd = pd_;
  sa.srq_type = static_cast<ibv_srq_type>(77);
  EXPECT_NULL_ERRNO(v->create_srq_ex(ctx_, &sa));
  sa.srq_type = IBV_SRQT_XRC;
  sa.attr.max_wr = 0;
  EXPECT_NULL_ERRNO(v->create_srq_ex(ctx_, &sa));
  sa.attr.max_wr = 2;
  ibv_srq* srq = v->create_srq_ex(ctx_, &sa);
  ASSERT_NE(srq, nullptr) << std::strerror(errno);
  uint32_t num = 0;
  EXPECT_EQ(v->get_srq_num(nullptr, &num), EINVAL);
  EXPECT_EQ(v->get_srq_num(srq, nullptr), EINVAL);
  EXPECT_EQ(v->get_srq_num(srq, &num), 0);
  EXPECT_EQ(ibv_destroy_cq(cq_), EBUSY);  // the XRC SRQ completes there
  EXPECT_EQ(v->close_xrcd(xrcd), EBUSY);

  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_XRC_RECV;
  qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  qa.xrcd = other_xrcd;
  EXPECT_NULL_ERRNO(v->create_qp_ex(ctx_, &qa));
  qa.xrcd = nullptr;
  EXPECT_NULL_ERRNO(v->create_qp_ex(ctx_, &qa));
  qa.xrcd = xrcd;
  ibv_qp* tgt = v->create_qp_ex(ctx_, &qa);
  ASSERT_NE(tgt, nullptr) << std::strerror(errno);
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = IBV_QPT_XRC_SEND;
  ia.comp_mask = IBV_QP_INIT_ATTR_PD;
  ia.pd = pd_;
  ia.cap.max_send_wr = 2;
  ia.cap.max_send_sge = 1;
  EXPECT_NULL_ERRNO(v->create_qp_ex(ctx_, &ia));  // no send CQ
  ia.send_cq = other_cq_;
  EXPECT_NULL_ERRNO(v->create_qp_ex(ctx_, &ia));
  ia.send_cq = cq_;
  ia.recv_cq = other_cq_;  // an initiator has no receive side: ignored
  ibv_qp* ini = v->create_qp_ex(ctx_, &ia);
  ASSERT_NE(ini, nullptr) << std::strerror(errno);

  EXPECT_NULL_ERRNO(v->open_qp(ctx_, nullptr));
  ibv_qp_open_attr oa{};
  EXPECT_NULL_ERRNO(v->open_qp(ctx_, &oa));
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  oa.qp_type = IBV_QPT_XRC_RECV;
  oa.xrcd = xrcd;
  oa.qp_num = ini->qp_num;  // not a target
  EXPECT_NULL_ERRNO(v->open_qp(ctx_, &oa));
  oa.qp_num = qp_->qp_num;  // an RC QP
  EXPECT_NULL_ERRNO(v->open_qp(ctx_, &oa));
  oa.qp_num = tgt->qp_num;
  oa.xrcd = other_xrcd;
  EXPECT_NULL_ERRNO(v->open_qp(ctx_, &oa));
  oa.xrcd = xrcd;
  oa.qp_type = IBV_QPT_RC;
  EXPECT_NULL_ERRNO(v->open_qp(ctx_, &oa));
  oa.qp_type = IBV_QPT_XRC_RECV;
  ibv_qp* opened = v->open_qp(ctx_, &oa);
  ASSERT_NE(opened, nullptr);

  // Queues the XRC QPs do not have; ops on a target handle.
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_), 8, mr_->lkey};
  ibv_recv_wr r{};
  r.sg_list = &sge;
  r.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  EXPECT_EQ(ibv_post_recv(tgt, &r, &bad_r), EINVAL);
  EXPECT_EQ(ibv_post_recv(ini, &r, &bad_r), EINVAL);
  ibv_send_wr s{};
  s.sg_list = &sge;
  s.num_sge = 1;
  s.opcode = IBV_WR_SEND;
  ibv_send_wr* bad_s = nullptr;
  EXPECT_EQ(ibv_post_send(opened, &s, &bad_s), EINVAL);
  EXPECT_EQ(ibv_post_send(ini, &s, &bad_s), EINVAL);  // RESET
  ibv_qp_ex* tx = ibv_qp_to_qp_ex(opened);
  ibv_wr_start(tx);
  ibv_wr_send(tx);
  ibv_wr_set_xrc_srqn(tx, num);
  ibv_wr_set_sge(tx, mr_->lkey, reinterpret_cast<uintptr_t>(buf_), 8);
  EXPECT_NE(ibv_wr_complete(tx), 0);
  ibv_qp_attr qattr{};
  ibv_qp_init_attr qinit{};
  EXPECT_EQ(ibv_query_qp(opened, &qattr, IBV_QP_STATE, &qinit), 0);
  EXPECT_EQ(qinit.send_cq, nullptr);
  qattr = {};
  qattr.qp_state = IBV_QPS_INIT;
  qattr.port_num = 1;
  EXPECT_EQ(ibv_modify_qp(tgt, &qattr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), EINVAL);
  EXPECT_EQ(ibv_modify_qp(tgt, &qattr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  EXPECT_EQ(opened->state, IBV_QPS_RESET);  // this handle's copy; ibv_query_qp refreshes it
  EXPECT_EQ(ibv_query_qp(opened, &qattr, IBV_QP_STATE, &qinit), 0);
  EXPECT_EQ(qattr.qp_state, IBV_QPS_INIT);

  // Destroys in any order; the domain goes last.
  EXPECT_EQ(ibv_destroy_qp(tgt), 0);
  EXPECT_EQ(ibv_modify_qp(opened, &qattr, IBV_QP_STATE), 0);  // INIT -> INIT on the surviving handle
  EXPECT_EQ(ibv_destroy_qp(opened), 0);
  EXPECT_EQ(ibv_destroy_qp(ini), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(v->close_xrcd(xrcd), 0);
  EXPECT_EQ(verbs_get_ctx(other_)->close_xrcd(other_xrcd), 0);
}

// Objects destroyed while events about them are queued: the events go with
// them (uverbs drops them too); reading the async fd afterwards finds
// nothing, never a dangling object.
TEST_F(NeverACrash, EventsOfDestroyedObjectsGoWithThem) {
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd_, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = cq_;
  a.srq = srq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 2;
  a.cap.max_send_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd_, &a);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr m{};
  m.qp_state = IBV_QPS_INIT;
  m.port_num = 1;
  ASSERT_EQ(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  m.qp_state = IBV_QPS_ERR;  // a QP with an SRQ to ERR: IBV_EVENT_QP_LAST_WQE_REACHED
  ASSERT_EQ(ibv_modify_qp(qp, &m, IBV_QP_STATE), 0);
  const int flags = fcntl(ctx_->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  pollfd pfd{ctx_->async_fd, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 0), 1);  // queued
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  // What is left (the port's events) names no QP, CQ or SRQ.
  ibv_async_event ev;
  int n = 0;
  while (ibv_get_async_event(ctx_, &ev) == 0 && ++n < 100) {
    EXPECT_NE(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
    EXPECT_TRUE(ev.event_type == IBV_EVENT_PORT_ACTIVE || ev.event_type == IBV_EVENT_PORT_ERR ||
                ev.event_type == IBV_EVENT_GID_CHANGE) << ev.event_type;
    ibv_ack_async_event(&ev);
  }
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(ctx_, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags), 0);
}

// The exported verbs the tests above do not reach, with edge arguments.
TEST_F(NeverACrash, TheOtherExportsWithEdgeArguments) {
  // Device identity: a GUID per device, an index per device.
  EXPECT_NE(ibv_get_device_guid(list_[0]), 0u);
  EXPECT_NE(ibv_get_device_guid(list_[0]), ibv_get_device_guid(list_[1]));
  EXPECT_GE(ibv_get_device_index(list_[0]), 0);
  EXPECT_NE(ibv_get_device_index(list_[0]), ibv_get_device_index(list_[1]));
  ibv_device_attr da{};
  EXPECT_EQ(ibv_query_device(ctx_, &da), 0);
  EXPECT_GT(da.max_qp, 0);
  int type = -1;
  EXPECT_EQ(ibv_query_gid_type(ctx_, 1, 0, &type), 0);
  EXPECT_EQ(type, 1);  // sysfs "RoCE v2"
  EXPECT_NE(ibv_query_gid_type(ctx_, 1, 1u << 20, &type), 0);
  EXPECT_NE(ibv_query_gid_type(ctx_, 2, 0, &type), 0);
  EXPECT_GE(ibv_query_qp_data_in_order(qp_, IBV_WR_RDMA_WRITE, 0), 0);
  // The rdma_cm shim's question (verbs_shim/sibling.h): the engine behind an
  // emulated context, nothing for anything else.
  EXPECT_EQ(rocelab_verbs_engine(ctx_), rocelab::verbs_shim::shim(ctx_)->engine);
  EXPECT_EQ(rocelab_verbs_engine(nullptr), nullptr);
  // Service IDs for REQ steering: no engine, no list, a list on a device that
  // shares no address (ROCELAB_SHARED_ADDRESS unset) are all quietly ignored.
  const uint64_t services[2] = {0x0106000000004e20ull, 0};
  rocelab_verbs_set_services(nullptr, services, 2);
  rocelab_verbs_set_services(rocelab_verbs_engine(ctx_), nullptr, 5);
  rocelab_verbs_set_services(rocelab_verbs_engine(ctx_), services, 2);
  rocelab_verbs_set_services(rocelab_verbs_engine(ctx_), services, 0);
  // Nobody else listens where no address is shared, and no engine is nobody's.
  EXPECT_EQ(rocelab_verbs_service_taken(rocelab_verbs_engine(ctx_), services[0]), 0);
  EXPECT_EQ(rocelab_verbs_service_taken(nullptr, services[0]), 0);
  EXPECT_EQ(rocelab_verbs_engine(ctx_), rocelab::verbs_shim::shim(ctx_)->engine);
  EXPECT_GE(ibv_query_qp_data_in_order(qp_, static_cast<ibv_wr_opcode>(0x7f), ~0u), 0);
  ibv_ah_attr ah{};
  uint8_t mac[6];
  uint16_t vid = 0;
  EXPECT_EQ(ibv_resolve_eth_l2_from_gid(ctx_, &ah, mac, &vid), EOPNOTSUPP);

  // ibv_reg_mr_iova2: an MR at an IOVA of the caller's choosing, or an errno.
  ibv_mr* mr = ibv_reg_mr_iova2(pd_, buf_, sizeof buf_, 0x1000, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  // Remote write without local write is invalid (IBTA o10-9.1; libibverbs' man page).
  EXPECT_NULL_ERRNO(ibv_reg_mr_iova2(pd_, buf_, sizeof buf_, 0, IBV_ACCESS_REMOTE_WRITE));
  EXPECT_NULL_ERRNO(ibv_reg_mr_iova2(pd_, buf_, sizeof buf_, ~0ull - 8, IBV_ACCESS_LOCAL_WRITE));
  EXPECT_NULL_ERRNO(ibv_reg_mr_iova2(pd_, buf_, sizeof buf_, 0, 1u << 30));  // unknown access bit
  mr = ibv_reg_mr_iova2(pd_, buf_, 0, 0, IBV_ACCESS_LOCAL_WRITE);            // zero length
  if (mr) {
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
  } else {
    EXPECT_NE(errno, 0);
  }

  // ibv_query_srq on a live SRQ.
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd_, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr q{};
  EXPECT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_GE(q.max_wr, 4u);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);

  // Import: fds that are no emulated context's, handles nobody holds.
  EXPECT_NULL_ERRNO(ibv_import_device(-1));
  const int devnull = open("/dev/null", O_RDWR);
  ASSERT_GE(devnull, 0);
  EXPECT_NULL_ERRNO(ibv_import_device(devnull));
  close(devnull);
  EXPECT_NULL_ERRNO(ibv_import_pd(ctx_, 0xdead));
  EXPECT_NULL_ERRNO(ibv_import_mr(pd_, 0xdead00));
  // A context imported from a dup of cmd_fd: its PD and MR by handle, unimported
  // (the originals live on), then an MR that went cannot be imported.
  const int fd2 = dup(ctx_->cmd_fd);
  ASSERT_GE(fd2, 0);
  ibv_context* ctx2 = ibv_import_device(fd2);
  ASSERT_NE(ctx2, nullptr);
  ibv_pd* pd2 = ibv_import_pd(ctx2, pd_->handle);
  ASSERT_NE(pd2, nullptr);
  ibv_mr* mr2 = ibv_import_mr(pd2, mr_->handle);
  ASSERT_NE(mr2, nullptr);
  EXPECT_EQ(mr2->lkey, mr_->lkey);
  EXPECT_EQ(mr2->length, mr_->length);
  ibv_unimport_mr(mr2);
  ibv_unimport_pd(pd2);
  ibv_mr* gone = ibv_reg_mr(pd_, buf_, 16, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(gone, nullptr);
  const uint32_t gone_handle = gone->handle;
  EXPECT_EQ(ibv_dereg_mr(gone), 0);
  pd2 = ibv_import_pd(ctx2, pd_->handle);
  ASSERT_NE(pd2, nullptr);
  EXPECT_NULL_ERRNO(ibv_import_mr(pd2, gone_handle));
  ibv_unimport_pd(pd2);
  EXPECT_EQ(ibv_close_device(ctx2), 0);
  // The original PD still works after its import went.
  mr = ibv_reg_mr(pd_, buf_, 16, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  // Device memory does not exist here: an ibv_dm of an emulated context is ignored.
  ibv_dm dm{};
  dm.context = ctx_;
  ibv_unimport_dm(&dm);
}

// Every function the shim exports (its version script) is called somewhere in
// this file: a new export without an edge-argument call here fails this test.
TEST(NeverACrashCoverage, EveryExportedVerbIsCalledInThisFile) {
  std::ifstream map(ROCELAB_SHIM_MAP), self(ROCELAB_THIS_FILE);
  ASSERT_TRUE(map.good()) << ROCELAB_SHIM_MAP;
  ASSERT_TRUE(self.good()) << ROCELAB_THIS_FILE;
  std::stringstream ss;
  ss << self.rdbuf();
  const std::string source = ss.str();
  const std::regex entry(R"(^\s+([A-Za-z_][A-Za-z_0-9]*);)");
  std::string line;
  int n = 0;
  std::set<std::string> missing;
  while (std::getline(map, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, entry)) continue;
    std::string name = m[1];
    ++n;
    // _ibv_query_gid_ex and friends are reached through their inline wrappers.
    if (name.front() == '_') name.erase(0, 1);
    if (!std::regex_search(source, std::regex("\\b" + name + "\\b"))) missing.insert(name);
  }
  EXPECT_GT(n, 40);
  std::string list;
  for (const auto& s : missing) list += s + " ";
  EXPECT_TRUE(missing.empty()) << "exported but never called here: " << list;
}

}  // namespace
