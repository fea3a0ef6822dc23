// A stand-in for the real libibverbs.so.1 with one "hardware" device,
// `standin0`, for testing the shim's pass-through where no RDMA hardware
// exists. Every function counts its calls (standin_call_count) and hands out
// objects with recognisable contents, so a test can tell that a call on a
// real device's object arrived here unchanged. Its contexts carry their own
// ops (post_send, poll_cq ...), which count too.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

namespace {

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::map<std::string, unsigned long>& counts() {
  static std::map<std::string, unsigned long> c;
  return c;
}
void count(const char* fn) {
  std::lock_guard lock(mu());
  ++counts()[fn];
}

// A provider's device: ibv_device first, inside a larger zeroed block.
struct StandinDevice {
  ibv_device dev;
  unsigned char provider_private[256];
};
StandinDevice* the_device() {
  static StandinDevice* d = [] {
    auto* p = static_cast<StandinDevice*>(std::calloc(1, sizeof(StandinDevice)));
    p->dev.node_type = IBV_NODE_CA;
    p->dev.transport_type = IBV_TRANSPORT_IB;
    std::strcpy(p->dev.name, "standin0");
    std::strcpy(p->dev.dev_name, "uverbs0");
    return p;
  }();
  return d;
}
ibv_device** last_list = nullptr;

int op_poll_cq(ibv_cq*, int, ibv_wc*) { count("ops.poll_cq"); return 0; }
int op_req_notify_cq(ibv_cq*, int) { count("ops.req_notify_cq"); return 0; }
int op_post_send(ibv_qp*, ibv_send_wr*, ibv_send_wr**) { count("ops.post_send"); return 0; }
int op_post_recv(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**) { count("ops.post_recv"); return 0; }

}  // namespace

extern "C" {

unsigned long standin_call_count(const char* fn) {
  std::lock_guard lock(mu());
  auto it = counts().find(fn);
  return it == counts().end() ? 0 : it->second;
}

ibv_device** ibv_get_device_list(int* num) {
  count("ibv_get_device_list");
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  list[0] = &the_device()->dev;
  last_list = list;
  if (num) *num = 1;
  return list;
}

void ibv_free_device_list(ibv_device** list) {
  // Only lists this library made may come back here.
  count(list == last_list ? "ibv_free_device_list" : "ibv_free_device_list.foreign");
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* d) {
  count("ibv_get_device_name");
  return d->name;
}
__be64 ibv_get_device_guid(ibv_device*) {
  count("ibv_get_device_guid");
  return htobe64(0x1122334455667788ull);
}
int ibv_get_device_index(ibv_device*) {
  count("ibv_get_device_index");
  return 7;
}

ibv_context* ibv_open_device(ibv_device* d) {
  count("ibv_open_device");
  if (d != &the_device()->dev) {
    errno = ENODEV;
    return nullptr;
  }
  auto* ctx = static_cast<ibv_context*>(std::calloc(1, sizeof(ibv_context)));
  ctx->device = d;
  ctx->ops.poll_cq = op_poll_cq;
  ctx->ops.req_notify_cq = op_req_notify_cq;
  ctx->ops.post_send = op_post_send;
  ctx->ops.post_recv = op_post_recv;
  ctx->cmd_fd = -1;
  ctx->async_fd = -1;
  ctx->num_comp_vectors = 1;
  ctx->abi_compat = nullptr;  // not extended: ibv_query_port takes the exported path
  return ctx;
}
int ibv_close_device(ibv_context* ctx) {
  count("ibv_close_device");
  std::free(ctx);
  return 0;
}

int ibv_query_device(ibv_context*, ibv_device_attr* attr) {
  count("ibv_query_device");
  std::memset(attr, 0, sizeof *attr);
  attr->vendor_id = 0x02c9;
  attr->phys_port_cnt = 1;
  return 0;
}
int ibv_query_port(ibv_context*, uint8_t, _compat_ibv_port_attr* attr) {
  count("ibv_query_port");
  auto* a = reinterpret_cast<ibv_port_attr*>(attr);
  a->state = IBV_PORT_ACTIVE;
  a->lid = 0x42;
  a->link_layer = IBV_LINK_LAYER_INFINIBAND;
  return 0;
}
int ibv_query_gid(ibv_context*, uint8_t, int, ibv_gid* gid) {
  count("ibv_query_gid");
  std::memset(gid, 0xab, sizeof *gid);
  return 0;
}
int ibv_query_gid_type(ibv_context*, uint8_t, unsigned, int* type) {
  count("ibv_query_gid_type");
  *type = 0;
  return 0;
}
int ibv_query_pkey(ibv_context*, uint8_t, int, __be16* pkey) {
  count("ibv_query_pkey");
  *pkey = htobe16(0xffff);
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  count("ibv_alloc_pd");
  auto* pd = static_cast<ibv_pd*>(std::calloc(1, sizeof(ibv_pd)));
  pd->context = ctx;
  pd->handle = 0x5d;
  return pd;
}
int ibv_dealloc_pd(ibv_pd* pd) {
  count("ibv_dealloc_pd");
  std::free(pd);
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int) {
  count("ibv_reg_mr");
  auto* mr = static_cast<ibv_mr*>(std::calloc(1, sizeof(ibv_mr)));
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = 0x1234;
  mr->rkey = 0x5678;
  return mr;
}
ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t, unsigned access) {
  count("ibv_reg_mr_iova2");
  return ibv_reg_mr(pd, addr, len, static_cast<int>(access));
}
int ibv_dereg_mr(ibv_mr* mr) {
  count("ibv_dereg_mr");
  std::free(mr);
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  count("ibv_create_comp_channel");
  auto* ch = static_cast<ibv_comp_channel*>(std::calloc(1, sizeof(ibv_comp_channel)));
  ch->context = ctx;
  ch->fd = -1;
  return ch;
}
int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
  count("ibv_destroy_comp_channel");
  std::free(ch);
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* ch, int) {
  count("ibv_create_cq");
  auto* cq = static_cast<ibv_cq*>(std::calloc(1, sizeof(ibv_cq)));
  cq->context = ctx;
  cq->cq_context = cq_context;
  cq->channel = ch;
  cq->cqe = cqe;
  return cq;
}
int ibv_destroy_cq(ibv_cq* cq) {
  count("ibv_destroy_cq");
  std::free(cq);
  return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  count("ibv_create_qp");
  auto* qp = static_cast<ibv_qp*>(std::calloc(1, sizeof(ibv_qp)));
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = attr->send_cq;
  qp->recv_cq = attr->recv_cq;
  qp->qp_num = 0xabcde;
  qp->qp_type = attr->qp_type;
  qp->state = IBV_QPS_RESET;
  return qp;
}
int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  count("ibv_modify_qp");
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
  return 0;
}
int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr*) {
  count("ibv_query_qp");
  attr->qp_state = qp->state;
  return 0;
}
int ibv_destroy_qp(ibv_qp* qp) {
  count("ibv_destroy_qp");
  std::free(qp);
  return 0;
}

}  // extern "C"
