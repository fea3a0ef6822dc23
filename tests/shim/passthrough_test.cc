// Pass-through: with the shim preloaded, a real device (the stand-in
// libibverbs.so.1's `standin0`, found through LD_LIBRARY_PATH) is listed beside
// the emulated ones, and every call on its objects reaches the real library
// unchanged, while calls on emulated devices never do. ctest runs this with
// LD_PRELOAD=librocelab_verbs.so and LD_LIBRARY_PATH=<stand-in dir>.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace {

unsigned long calls(const char* fn) {
  using CountFn = unsigned long (*)(const char*);
  static auto f = reinterpret_cast<CountFn>(dlsym(RTLD_DEFAULT, "standin_call_count"));
  return f ? f(fn) : ~0ul;
}

class PassThrough : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(dlsym(RTLD_DEFAULT, "standin_call_count"), nullptr)
        << "the stand-in libibverbs.so.1 is not loaded (LD_LIBRARY_PATH)";
    list_ = ibv_get_device_list(&n_);
    ASSERT_NE(list_, nullptr);
    for (int i = 0; i < n_; ++i) {
      std::string name = list_[i]->name;
      if (name == "standin0") real_ = list_[i];
      if (name == "rocelab0") emu_ = list_[i];
    }
    ASSERT_NE(real_, nullptr) << "real device missing from the merged list";
    ASSERT_NE(emu_, nullptr) << "emulated device missing: is the shim preloaded?";
  }
  void TearDown() override {
    if (list_) ibv_free_device_list(list_);
  }
  ibv_device** list_ = nullptr;
  int n_ = 0;
  ibv_device* real_ = nullptr;
  ibv_device* emu_ = nullptr;
};

TEST_F(PassThrough, MergedListHasEmulatedFirstThenReal) {
  ASSERT_EQ(n_, 2);
  EXPECT_EQ(list_[0], emu_);
  EXPECT_EQ(list_[1], real_);
  EXPECT_EQ(list_[2], nullptr);
  EXPECT_EQ(calls("ibv_get_device_list"), 1u);
}

TEST_F(PassThrough, FreeReturnsTheRealListToTheRealLibrary) {
  unsigned long before = calls("ibv_free_device_list");
  ibv_free_device_list(list_);
  list_ = nullptr;
  EXPECT_EQ(calls("ibv_free_device_list"), before + 1);
  EXPECT_EQ(calls("ibv_free_device_list.foreign"), 0u);
}

TEST_F(PassThrough, DeviceQueriesOnRealDeviceReachRealLibrary) {
  unsigned long name0 = calls("ibv_get_device_name"), guid0 = calls("ibv_get_device_guid");
  EXPECT_STREQ(ibv_get_device_name(real_), "standin0");
  EXPECT_EQ(be64toh(ibv_get_device_guid(real_)), 0x1122334455667788ull);
  EXPECT_EQ(ibv_get_device_index(real_), 7);
  EXPECT_EQ(calls("ibv_get_device_name"), name0 + 1);
  EXPECT_EQ(calls("ibv_get_device_guid"), guid0 + 1);
}

TEST_F(PassThrough, EmulatedDeviceNeverReachesRealLibrary) {
  unsigned long name0 = calls("ibv_get_device_name"), idx0 = calls("ibv_get_device_index");
  EXPECT_STREQ(ibv_get_device_name(emu_), "rocelab0");
  EXPECT_EQ(ibv_get_device_index(emu_), 0);
  EXPECT_EQ(emu_->node_type, IBV_NODE_CA);
  EXPECT_EQ(calls("ibv_get_device_name"), name0);
  EXPECT_EQ(calls("ibv_get_device_index"), idx0);
}

TEST_F(PassThrough, ObjectsOfRealDeviceGoToRealLibraryAndKeepTheirOps) {
  ibv_context* ctx = ibv_open_device(real_);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(ctx->device, real_);
  EXPECT_EQ(calls("ibv_open_device"), 1u);

  ibv_device_attr dattr;
  ASSERT_EQ(ibv_query_device(ctx, &dattr), 0);
  EXPECT_EQ(dattr.vendor_id, 0x02c9u);
  // Not an extended context: the inline ibv_query_port takes the exported
  // compat function, which must forward.
  ibv_port_attr pattr;
  ASSERT_EQ(ibv_query_port(ctx, 1, &pattr), 0);
  EXPECT_EQ(pattr.lid, 0x42);
  EXPECT_EQ(calls("ibv_query_port"), 1u);
  ibv_gid gid;
  ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
  EXPECT_EQ(gid.raw[0], 0xab);
  __be16 pkey;
  ASSERT_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
  EXPECT_EQ(be16toh(pkey), 0xffff);

  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pd->handle, 0x5du);
  char buf[64];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->lkey, 0x1234u);
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(cq->cqe, 16);
  ibv_qp_init_attr qia{};
  qia.send_cq = cq;
  qia.recv_cq = cq;
  qia.qp_type = IBV_QPT_RC;
  ibv_qp* qp = ibv_create_qp(pd, &qia);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->qp_num, 0xabcdeu);
  ibv_qp_attr qa{};
  qa.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE), 0);
  EXPECT_EQ(qp->state, IBV_QPS_INIT);

  // The data path goes through the real context's own ops.
  ibv_send_wr wr{}, *bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp, &wr, &bad), 0);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0);
  EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
  EXPECT_EQ(calls("ops.post_send"), 1u);
  EXPECT_EQ(calls("ops.poll_cq"), 1u);
  EXPECT_EQ(calls("ops.req_notify_cq"), 1u);

  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
  for (const char* fn : {"ibv_query_device", "ibv_query_gid", "ibv_query_pkey", "ibv_alloc_pd",
                         "ibv_reg_mr", "ibv_create_comp_channel", "ibv_create_cq", "ibv_create_qp",
                         "ibv_modify_qp", "ibv_destroy_qp", "ibv_destroy_cq",
                         "ibv_destroy_comp_channel", "ibv_dereg_mr", "ibv_dealloc_pd",
                         "ibv_close_device"}) {
    EXPECT_EQ(calls(fn), 1u) << fn;
  }
}

}  // namespace
