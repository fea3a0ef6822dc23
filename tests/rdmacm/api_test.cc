// The rdma_cm shim through librdmacm's own API, linked in-process with the
// verbs shim (ahead of libibverbs and librdmacm, as preloading puts them), so
// it runs under ASan/UBSan too: the errnos of bad calls, the event channel's
// fd (blocking and non-blocking), the public fields programs read, and a
// connection of the process to itself with private data both ways.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace {

// The address of this process's device, 127.A.B.1. The test scripts' harness
// (tests/lib/harness.sh) claims a port for this process, held until it exits,
// in the claims every rocelab suite on the machine shares, and names the /24
// that belongs to it (net_of): no other test of any suite, nor another test of
// this binary running beside it, has an address there. Claimed at the first
// test that needs a device, which also sets the shims' environment before they
// first read it; "" if no port could be claimed.
const char* device_ip() {
  static const std::string ip = [] {
    const std::string cmd = "bash -c '. \"$0\" && p=$(claim_port \"$1\") && net_of \"$p\"' '" ROCELAB_HARNESS
                            "' " + std::to_string(getpid());
    FILE* out = popen(cmd.c_str(), "r");
    if (!out) return std::string();
    char net[32] = {};
    const bool got = std::fgets(net, sizeof net, out) != nullptr;
    if (pclose(out) != 0 || !got) return std::string();
    std::string a(net, std::strcspn(net, "\n"));
    a += ".1";
    setenv("ROCELAB_DEVICES", "rocelab0", 1);
    setenv("ROCELAB_IP", a.c_str(), 1);
    unsetenv("ROCELAB_PCAP");
    unsetenv("ROCELAB_EVENTS");
    return a;
  }();
  return ip.c_str();
}

sockaddr_in addr(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}
sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

// Waits (bounded) for the next event on ch and checks its type.
rdma_cm_event* next(rdma_event_channel* ch, rdma_cm_event_type want) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) {
    ADD_FAILURE() << "no event within 10 s, wanted " << rdma_event_str(want);
    return nullptr;
  }
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch, &e) != 0) {
    ADD_FAILURE() << "rdma_get_cm_event: " << std::strerror(errno);
    return nullptr;
  }
  EXPECT_EQ(e->event, want) << rdma_event_str(e->event) << " status " << e->status;
  return e;
}

class RdmaCm : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_STRNE(device_ip(), "") << "no port claimed for the device's address (tests/lib/harness.sh)";
    ch_ = rdma_create_event_channel();
    ASSERT_NE(ch_, nullptr) << std::strerror(errno);
  }
  void TearDown() override {
    if (ch_) rdma_destroy_event_channel(ch_);
  }
  rdma_event_channel* ch_ = nullptr;
};

TEST_F(RdmaCm, BadArgumentsGiveLibrdmacmsErrnos) {
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(nullptr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_create_id(ch_, nullptr, nullptr, RDMA_PS_TCP), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_cm_id* id = nullptr;
  EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, static_cast<rdma_port_space>(0x4242)), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(id->channel, ch_);
  EXPECT_EQ(id->ps, RDMA_PS_TCP);
  EXPECT_EQ(id->qp_type, IBV_QPT_RC);
  EXPECT_EQ(id->verbs, nullptr);

  // Not bound, not resolved: nothing to connect, route or accept.
  rdma_conn_param p{};
  EXPECT_EQ(rdma_connect(id, &p), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_resolve_route(id, 100), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_accept(id, &p), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_disconnect(id), -1);
  EXPECT_EQ(errno, EINVAL);

  // An address that is nobody's here.
  auto other = addr("10.255.255.1", 0);
  EXPECT_EQ(rdma_bind_addr(id, sa(other)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  sockaddr_storage ib{};
  ib.ss_family = AF_IB;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&ib)), -1);
  EXPECT_EQ(errno, EAFNOSUPPORT);

  // Options: the size must be the option's.
  int four = 4;
  uint8_t tos = 32;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &four, sizeof four), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos), 0);
  int on = 1;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on), 0);

  // Bound: a second bind, and another id on the same port.
  auto mine = addr(device_ip(), 19140);
  ASSERT_EQ(rdma_bind_addr(id, sa(mine)), 0) << std::strerror(errno);
  EXPECT_NE(id->verbs, nullptr);
  EXPECT_EQ(id->port_num, 1);
  EXPECT_EQ(rdma_get_src_port(id), htons(19140));
  EXPECT_EQ(rdma_bind_addr(id, sa(mine)), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_cm_id* id2 = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id2, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(rdma_bind_addr(id2, sa(mine)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  auto group = addr("239.1.2.3", 0);
  EXPECT_EQ(rdma_leave_multicast(id2, sa(group)), -1);
  EXPECT_NE(errno, 0);
  EXPECT_EQ(rdma_destroy_id(id2), 0);

  // A channel in use cannot go.
  EXPECT_EQ(rdma_destroy_id(id), 0);

  // rsockets: a clear refusal on emulated devices.
  errno = 0;
  EXPECT_EQ(rsocket(AF_INET, SOCK_STREAM, 0), -1);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_STREQ(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED");
  EXPECT_STREQ(rdma_event_str(static_cast<rdma_cm_event_type>(99)), "UNKNOWN EVENT");
}

TEST_F(RdmaCm, DevicesAndListenOnAnEphemeralPort) {
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(n, 1);
  EXPECT_STREQ(ibv_get_device_name(list[0]->device), "rocelab0");
  EXPECT_EQ(list[1], nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  auto any = addr(device_ip(), 0);
  ASSERT_EQ(rdma_bind_addr(id, sa(any)), 0);
  EXPECT_EQ(id->verbs, list[0]);
  ASSERT_EQ(rdma_listen(id, 4), 0);
  uint16_t port = ntohs(rdma_get_src_port(id));
  EXPECT_GE(port, 32768);
  EXPECT_LE(port, 60999);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  rdma_free_devices(list);
}

TEST_F(RdmaCm, NonBlockingChannel) {
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch_, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, this, RDMA_PS_TCP), 0);
  auto dst = addr(device_ip(), 19141);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 2000), 0);
  e = next(ch_, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, id);
  EXPECT_EQ(e->id->context, this);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_get_cm_event(ch_, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
  e = next(ch_, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  // The route as programs read it.
  EXPECT_EQ(id->route.num_paths, 1);
  ASSERT_NE(id->route.path_rec, nullptr);
  EXPECT_EQ(id->route.path_rec->pkey, htons(0xFFFF));
  auto* d = reinterpret_cast<sockaddr_in*>(&id->route.addr.dst_addr);
  EXPECT_EQ(d->sin_family, AF_INET);
  EXPECT_EQ(d->sin_port, htons(19141));
  EXPECT_EQ(std::memcmp(&d->sin_addr, &dst.sin_addr, 4), 0);
  uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};  // ::ffff: and the device's address
  std::memcpy(mapped + 12, &dst.sin_addr, 4);
  EXPECT_EQ(std::memcmp(id->route.addr.addr.ibaddr.dgid.raw, mapped, 16), 0);
  EXPECT_EQ(std::memcmp(id->route.addr.addr.ibaddr.sgid.raw, mapped, 16), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// A destroyed channel: the thread that destroyed it gets EBADF, as read() on
// the closed fd; another thread whose event loop comes back to it just after
// (rping's cm_thread, racing main's rdma_destroy_event_channel) stays blocked,
// as it would had it been back in read() first, instead of failing the program.
TEST_F(RdmaCm, DestroyedChannelBlocksOtherThreadsAndFailsItsDestroyer) {
  rdma_event_channel* ch = ch_;
  ch_ = nullptr;
  rdma_destroy_event_channel(ch);
  rdma_cm_event* e = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(ch, &e), -1);
  EXPECT_EQ(errno, EBADF);
  static std::atomic<bool> returned{false};
  std::thread([ch] {
    rdma_cm_event* ev = nullptr;
    (void)rdma_get_cm_event(ch, &ev);
    returned = true;
  }).detach();  // blocked until the process ends
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load()) << "rdma_get_cm_event returned on a channel another thread destroyed";
}

// A process connecting to its own listener: REQ/REP/RTU to itself, private
// data both ways, QPs created by the shim (rdma_create_qp), a SEND over them.
TEST_F(RdmaCm, ConnectToOurselvesWithPrivateDataAndASend) {
  rdma_cm_id* listen = nullptr;
  rdma_cm_id* client = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &listen, nullptr, RDMA_PS_TCP), 0);
  auto srv = addr(device_ip(), 19142);
  ASSERT_EQ(rdma_bind_addr(listen, sa(srv)), 0);
  ASSERT_EQ(rdma_listen(listen, 1), 0);
  ASSERT_EQ(rdma_create_id(ch_, &client, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_resolve_addr(client, nullptr, sa(srv), 2000), 0);
  rdma_cm_event* e = next(ch_, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);
  rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_resolve_route(client, 2000), 0);
  e = next(ch_, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_NE(e, nullptr);
  rdma_ack_cm_event(e);

  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ASSERT_EQ(rdma_create_qp(client, nullptr, &qa), 0) << std::strerror(errno);
  ASSERT_NE(client->qp, nullptr);
  ASSERT_NE(client->send_cq, nullptr);
  ASSERT_NE(client->recv_cq_channel, nullptr);
  ASSERT_NE(client->pd, nullptr);

  const char hello[] = "hello from the active side";
  rdma_conn_param cp{};
  cp.private_data = hello;
  cp.private_data_len = sizeof hello;
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(client, &cp), 0) << std::strerror(errno);

  e = next(ch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->listen_id, listen);
  rdma_cm_id* child = e->id;
  ASSERT_NE(child, nullptr);
  EXPECT_NE(child, listen);
  EXPECT_EQ(child->verbs, client->verbs);
  EXPECT_EQ(e->param.conn.private_data_len, 56);  // 92 - rdma_cm's 36-byte header
  ASSERT_NE(e->param.conn.private_data, nullptr);
  EXPECT_STREQ(static_cast<const char*>(e->param.conn.private_data), hello);
  EXPECT_EQ(e->param.conn.qp_num, client->qp->qp_num);
  EXPECT_EQ(e->param.conn.responder_resources, 1);
  rdma_ack_cm_event(e);

  // rdma_create_qp wrote the CQs it made back into qa, as librdmacm does: start afresh.
  ibv_qp_init_attr qa2{};
  qa2.qp_type = IBV_QPT_RC;
  qa2.cap = qa.cap;
  ASSERT_EQ(rdma_create_qp(child, nullptr, &qa2), 0) << std::strerror(errno);
  ASSERT_NE(child->recv_cq, nullptr);
  EXPECT_NE(child->recv_cq, client->recv_cq);
  ibv_mr* mr = nullptr;
  char buf[64] = {};
  mr = ibv_reg_mr(child->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), sizeof buf, mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(child->qp, &rwr, &bad_r), 0);

  const char welcome[] = "welcome";
  rdma_conn_param ap{};
  ap.private_data = welcome;
  ap.private_data_len = sizeof welcome;
  ap.responder_resources = 1;
  ap.initiator_depth = 1;
  ASSERT_EQ(rdma_accept(child, &ap), 0) << std::strerror(errno);

  // Both ESTABLISHED (the active side's from CONNECT_RESPONSE: the shim moved
  // its QP and sent the RTU), in either order.
  int established = 0;
  for (int k = 0; k < 2; ++k) {
    e = next(ch_, RDMA_CM_EVENT_ESTABLISHED);
    ASSERT_NE(e, nullptr);
    if (e->id == client) {
      EXPECT_EQ(e->param.conn.private_data_len, 196);
      EXPECT_STREQ(static_cast<const char*>(e->param.conn.private_data), welcome);
      EXPECT_EQ(e->param.conn.qp_num, child->qp->qp_num);
      established |= 1;
    } else {
      EXPECT_EQ(e->id, child);
      established |= 2;
    }
    rdma_ack_cm_event(e);
  }
  EXPECT_EQ(established, 3);
  ibv_qp_attr qattr{};
  ibv_qp_init_attr qinit{};
  ASSERT_EQ(ibv_query_qp(client->qp, &qattr, IBV_QP_STATE | IBV_QP_DEST_QPN, &qinit), 0);
  EXPECT_EQ(qattr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(qattr.dest_qp_num, child->qp->qp_num);

  // A SEND over the pair (the client's send is inline-free: a registered buffer).
  char msg[64] = "through the connection";
  ibv_mr* smr = ibv_reg_mr(client->pd, msg, sizeof msg, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(smr, nullptr);
  ibv_sge ssge{reinterpret_cast<uintptr_t>(msg), sizeof msg, smr->lkey};
  ibv_send_wr swr{};
  swr.sg_list = &ssge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad_s = nullptr;
  ASSERT_EQ(ibv_post_send(client->qp, &swr, &bad_s), 0);
  ibv_wc wc{};
  int got = 0;
  for (int spin = 0; spin < 10000 && got == 0; ++spin) {
    got = ibv_poll_cq(child->recv_cq, 1, &wc);
    if (got == 0) usleep(1000);
  }
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(buf, msg);

  // Disconnect from the active side: DISCONNECTED on both.
  ASSERT_EQ(rdma_disconnect(client), 0);
  e = next(ch_, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, child);  // the DREQ arrived; the DREP is the program's
  rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_disconnect(child), 0);
  e = next(ch_, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, client);
  EXPECT_EQ(e->status, 0);
  rdma_ack_cm_event(e);

  ibv_dereg_mr(smr);
  ibv_dereg_mr(mr);
  rdma_destroy_qp(child);
  rdma_destroy_qp(client);
  EXPECT_EQ(child->qp, nullptr);
  EXPECT_EQ(rdma_destroy_id(child), 0);
  EXPECT_EQ(rdma_destroy_id(client), 0);
  EXPECT_EQ(rdma_destroy_id(listen), 0);
}

// Every symbol of the version script is librdmacm's (its map), and each
// rdma_* one is called somewhere in the tests of this directory.
TEST(RdmaCmExports, EveryExportedCallIsCalledInTheseTests) {
  std::ifstream map(ROCELAB_RDMACM_MAP), self(ROCELAB_THIS_FILE);
  ASSERT_TRUE(map.good());
  ASSERT_TRUE(self.good());
  std::stringstream ss;
  ss << self.rdbuf();
  const std::string source = ss.str();
  const std::regex entry(R"(^\s+(rdma_[A-Za-z_0-9]*);)");
  std::string line, missing;
  int n = 0;
  while (std::getline(map, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, entry)) continue;
    ++n;
    if (!std::regex_search(source, std::regex("\\b" + std::string(m[1]) + "\\b"))) missing += std::string(m[1]) + " ";
  }
  EXPECT_EQ(n, 41);
  // The synchronous, QP/SRQ, multicast and ECE calls are reached by the real
  // programs of tests/rdmacm (rdma_server/rdma_client, rping -q, mckey) and
  // by RdmaCmEdges below.
  EXPECT_EQ(missing, "") << "exported but never called here";
}

// The calls the tests above do not reach, with edge arguments.
TEST_F(RdmaCm, EdgesOfTheOtherCalls) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_UDP), 0);
  EXPECT_EQ(id->qp_type, IBV_QPT_UD);
  // No device yet: nothing to create on.
  ibv_qp_init_attr qa{};
  EXPECT_EQ(rdma_create_qp(id, nullptr, &qa), -1);
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_init_attr_ex qx{};
  EXPECT_EQ(rdma_create_qp_ex(id, &qx), -1);
  ibv_srq_init_attr sa_{};
  EXPECT_EQ(rdma_create_srq(id, nullptr, &sa_), -1);
  ibv_srq_init_attr_ex sx{};
  EXPECT_EQ(rdma_create_srq_ex(id, &sx), -1);
  rdma_destroy_srq(id);
  rdma_destroy_qp(id);
  ibv_qp_attr qattr{};
  int mask = 0;
  qattr.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(rdma_init_qp_attr(id, &qattr, &mask), -1);
  EXPECT_EQ(rdma_init_qp_attr(id, nullptr, &mask), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_establish(id), -1);
  EXPECT_EQ(rdma_notify(id, IBV_EVENT_COMM_EST), -1);
  EXPECT_EQ(rdma_reject(id, nullptr, 0), -1);
  EXPECT_EQ(rdma_reject_ece(id, nullptr, 0), -1);
  ibv_ece ece{};
  EXPECT_EQ(rdma_set_local_ece(id, &ece), 0);
  EXPECT_EQ(rdma_get_remote_ece(id, &ece), 0);
  EXPECT_EQ(ece.vendor_id, 0u);
  EXPECT_EQ(rdma_set_local_ece(id, nullptr), -1);
  auto group = addr("239.1.2.4", 0);
  EXPECT_EQ(rdma_join_multicast(id, sa(group), nullptr), -1);  // no device
  rdma_cm_join_mc_attr_ex mx{};
  EXPECT_EQ(rdma_join_multicast_ex(id, &mx, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_get_dst_port(id), 0);

  // Synchronous ids: migrated to no channel, then back.
  EXPECT_EQ(rdma_migrate_id(id, nullptr), 0);
  EXPECT_NE(id->channel, ch_);
  EXPECT_EQ(rdma_migrate_id(id, ch_), 0);
  EXPECT_EQ(id->channel, ch_);
  rdma_cm_id* listen = nullptr;
  EXPECT_EQ(rdma_get_request(id, &listen), -1);  // not synchronous
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_destroy_id(id), 0);

  // An endpoint from rdma_getaddrinfo, synchronous: resolved on return.
  rdma_addrinfo hints{}, *res = nullptr;
  hints.ai_port_space = RDMA_PS_TCP;
  ASSERT_EQ(rdma_getaddrinfo(device_ip(), "19143", &hints, &res), 0);
  rdma_cm_id* ep = nullptr;
  ASSERT_EQ(rdma_create_ep(&ep, res, nullptr, nullptr), 0) << std::strerror(errno);
  EXPECT_NE(ep->verbs, nullptr);
  EXPECT_EQ(ep->route.num_paths, 1);
  EXPECT_EQ(rdma_get_dst_port(ep), htons(19143));
  rdma_destroy_ep(ep);
  rdma_freeaddrinfo(res);
}

}  // namespace
