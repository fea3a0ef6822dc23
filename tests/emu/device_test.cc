// Device and port attributes, GIDs, completion channels, async events, SRQ
// limit and the UD GRH — through the public API.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include "tests/emu/pair.h"
#include "wire/byte_order.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                          access::kRemoteAtomic;

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// b: a device of env (node 2) whose RC QP takes its receives from an SRQ
// (returned), connected to a's QP. `before` runs on b's device once it exists.
template <typename Before>
Srq* srq_node(Env& env, Node& a, Node& b, Before&& before) {
  b.dev = env.make_device(2);
  before(*b.dev);
  b.pd = *b.dev->alloc_pd();
  b.scq = *b.dev->create_cq(16, nullptr, 0);
  b.rcq = *b.dev->create_cq(16, nullptr, 0);
  b.buf.assign(4096, std::byte{0});
  b.mr = *b.dev->reg_mr(b.pd, b.buf.data(), 4096, b.addr(), kAll);
  Srq* srq = *b.dev->create_srq(b.pd, SrqAttr{16, 1, 0});
  QpInitAttr ia;
  ia.send_cq = b.scq;
  ia.recv_cq = b.rcq;
  ia.srq = srq;
  ia.cap = {8, 0, 1, 0, 0};
  b.qp = *b.dev->create_qp(b.pd, ia);
  EXPECT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
  return srq;
}

TEST(Device, AttributesPortAndGidTable) {
  Env env(Net::kSim, Mtu::k2048);
  auto dev = env.make_device(7);
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->name(), "rocelab0");
  const DeviceAttr& d = dev->query_device();
  EXPECT_NE(d.vendor_id, 0u);
  EXPECT_EQ(d.max_qp_wr, 0x4000);
  EXPECT_EQ(d.max_sge, 32);
  EXPECT_EQ(d.max_cqe, 32767);
  EXPECT_EQ(d.max_qp_rd_atom, 128);
  EXPECT_EQ(d.atomic_cap, AtomicCap::kHca);
  EXPECT_EQ(d.phys_port_cnt, 1);
  EXPECT_EQ(d.node_guid, dev->node_guid());
  EXPECT_NE(d.node_guid, 0u);
  PortAttr p;
  ASSERT_FALSE(dev->query_port(1, &p));
  EXPECT_EQ(p.state, PortState::kActive);
  EXPECT_EQ(p.link_layer, LinkLayer::kEthernet);
  EXPECT_EQ(p.active_mtu, Mtu::k2048);
  EXPECT_EQ(p.max_mtu, Mtu::k4096);
  EXPECT_EQ(dev->query_port(2, &p), std::errc::invalid_argument);
  Gid g;
  ASSERT_FALSE(dev->query_gid(1, 0, &g));
  const Gid want = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 7};  // ::ffff:10.0.0.7
  EXPECT_EQ(g, want);
  GidType gt;
  ASSERT_FALSE(dev->query_gid_type(1, 0, &gt));
  EXPECT_EQ(gt, GidType::kRoceV2);
  EXPECT_EQ(dev->query_gid(1, p.gid_tbl_len, &g), std::errc::invalid_argument);
  uint16_t pkey = 0;
  ASSERT_FALSE(dev->query_pkey(1, 0, &pkey));
  EXPECT_EQ(pkey, 0xFFFF);
}

TEST(Device, PortActiveEventOnTheAsyncFd) {
  Env env(Net::kSim);
  auto dev = env.make_device(1);
  EXPECT_TRUE(readable(dev->async_fd()));
  AsyncEvent ev;
  ASSERT_FALSE(dev->get_async_event(&ev));
  EXPECT_EQ(ev.event_type, EventType::kPortActive);
  EXPECT_EQ(ev.port_num, 1);
  EXPECT_FALSE(readable(dev->async_fd()));
}

TEST(Device, BusyObjectsCannotBeDestroyed) {
  Env env(Net::kSim);
  Node n = env.make_node(1, QpType::kRC, 4096, kAll);
  EXPECT_EQ(n.dev->dealloc_pd(n.pd), std::errc::device_or_resource_busy);
  EXPECT_EQ(n.dev->destroy_cq(n.scq), std::errc::device_or_resource_busy);
  ASSERT_FALSE(n.dev->destroy_qp(n.qp));
  ASSERT_FALSE(n.dev->destroy_cq(n.scq));
  ASSERT_FALSE(n.dev->dereg_mr(n.mr));
  // Remote write without local write is refused at registration (IBTA 10.6.3.1).
  EXPECT_EQ(n.dev->reg_mr(n.pd, n.buf.data(), 64, 0, access::kRemoteWrite).error(), std::errc::invalid_argument);
}

class ChannelTest : public ::testing::TestWithParam<Net> {};

TEST_P(ChannelTest, FdBecomesReadableAfterArmedCompletion) {
  Env env(GetParam());
  Node a = env.make_node(1, QpType::kRC, 4096, kAll);
  Node b;
  b.dev = env.make_device(2);
  b.pd = *b.dev->alloc_pd();
  CompChannel* ch = *b.dev->create_comp_channel();
  b.scq = *b.dev->create_cq(16, nullptr, 0);
  b.rcq = *b.dev->create_cq(16, ch, 0);
  b.buf.assign(4096, std::byte{0});
  b.mr = *b.dev->reg_mr(b.pd, b.buf.data(), 4096, b.addr(), kAll);
  QpInitAttr ia;
  ia.send_cq = b.scq;
  ia.recv_cq = b.rcq;
  ia.cap = {8, 8, 1, 1, 0};
  b.qp = *b.dev->create_qp(b.pd, ia);
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
  EXPECT_FALSE(readable(ch->fd()));

  ASSERT_FALSE(b.rcq->req_notify(false));
  ASSERT_FALSE(post_recv(b.qp, b.addr(), 100, b.mr->lkey(), 1));
  Sge s{a.addr(), 10, a.mr->lkey()};
  ASSERT_FALSE(post_send(a.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  // Drive until the receive completion exists (without polling b's CQ).
  for (int i = 0; i < 2000 && !readable(ch->fd()); ++i) {
    if (GetParam() == Net::kSim) {
      env.step({a.dev.get(), b.dev.get()});
    } else {
      pollfd p{ch->fd(), POLLIN, 0};
      ::poll(&p, 1, 10);  // b's helper thread does the work
    }
  }
  ASSERT_TRUE(readable(ch->fd()));
  Cq* fired = nullptr;
  ASSERT_FALSE(ch->get_event(&fired));
  EXPECT_EQ(fired, b.rcq);
  fired->ack_events(1);
  EXPECT_EQ(b.rcq->events_acked(), 1u);
  EXPECT_FALSE(readable(ch->fd()));
  Wc wc;
  ASSERT_EQ(b.rcq->poll(std::span<Wc>(&wc, 1)), 1);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);

  // Not armed: a second completion does not signal.
  ASSERT_FALSE(post_recv(b.qp, b.addr(), 100, b.mr->lkey(), 2));
  ASSERT_FALSE(post_send(a.qp, make_wr(WrOpcode::kSend, &s, 1, 2)));
  auto wcs = env.wait_wcs(b.rcq, 1, {a.dev.get(), b.dev.get()});
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_FALSE(readable(ch->fd()));

  // Solicited only: an unsolicited SEND does not fire, a solicited one does.
  ASSERT_FALSE(b.rcq->req_notify(true));
  ASSERT_FALSE(post_recv(b.qp, b.addr(), 100, b.mr->lkey(), 3));
  ASSERT_FALSE(post_send(a.qp, make_wr(WrOpcode::kSend, &s, 1, 3)));
  ASSERT_EQ(env.wait_wcs(b.rcq, 1, {a.dev.get(), b.dev.get()}).size(), 1u);
  EXPECT_FALSE(readable(ch->fd()));
  ASSERT_FALSE(post_recv(b.qp, b.addr(), 100, b.mr->lkey(), 4));
  SendWr sol = make_wr(WrOpcode::kSend, &s, 1, 4);
  sol.send_flags |= send_flags::kSolicited;
  ASSERT_FALSE(post_send(a.qp, sol));
  for (int i = 0; i < 2000 && !readable(ch->fd()); ++i) {
    if (GetParam() == Net::kSim) {
      env.step({a.dev.get(), b.dev.get()});
    } else {
      pollfd p{ch->fd(), POLLIN, 0};
      ::poll(&p, 1, 10);
    }
  }
  EXPECT_TRUE(readable(ch->fd()));
  ASSERT_FALSE(ch->get_event(&fired));
  fired->ack_events(1);
}

INSTANTIATE_TEST_SUITE_P(Nets, ChannelTest, ::testing::Values(Net::kSim, Net::kUdp),
                         [](const auto& p) { return std::string(to_string(p.param)); });

// Cq::resize (ibv_resize_cq) grows past and shrinks down to the completions
// held, in order; below them, or out of range, EINVAL. The completions are
// flushed receives of a QP moved to ERR.
TEST(Cq, ResizeKeepsEveryCompletionInOrder) {
  Env env(Net::kSim);
  auto dev = env.make_device(1);
  ASSERT_TRUE(dev);
  Pd* pd = *dev->alloc_pd();
  Cq* cq = *dev->create_cq(4, nullptr, 0);
  QpInitAttr ia;
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = QpType::kRC;
  ia.cap = {8, 8, 1, 1, 0};
  Qp* qp = *dev->create_qp(pd, ia);
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  ASSERT_FALSE(qp->modify(a, qp_attr::kState | qp_attr::kPkeyIndex | qp_attr::kPort | qp_attr::kAccessFlags));
  auto post = [&](uint64_t id) {
    RecvWr r;
    r.wr_id = id;
    ASSERT_FALSE(qp->post_recv(std::span<const RecvWr>(&r, 1), nullptr));
  };
  for (uint64_t id = 0; id < 3; ++id) post(id);
  a.qp_state = QpState::kErr;
  ASSERT_FALSE(qp->modify(a, qp_attr::kState));  // three flushed receives in cq
  EXPECT_EQ(cq->resize(2), std::errc::invalid_argument);
  EXPECT_EQ(cq->resize(0), std::errc::invalid_argument);
  EXPECT_EQ(cq->resize(dev->query_device().max_cqe + 1), std::errc::invalid_argument);
  EXPECT_EQ(cq->capacity(), 4);
  ASSERT_FALSE(cq->resize(16));
  EXPECT_EQ(cq->capacity(), 16);
  for (uint64_t id = 3; id < 6; ++id) post(id);  // flushed at once: six, more than the old 4
  ASSERT_FALSE(cq->resize(6));
  EXPECT_EQ(cq->capacity(), 6);
  Wc wc[8];
  ASSERT_EQ(cq->poll(std::span<Wc>(wc, 8)), 6);
  for (uint64_t id = 0; id < 6; ++id) {
    EXPECT_EQ(wc[id].wr_id, id);
    EXPECT_EQ(wc[id].status, WcStatus::kWrFlushErr);
  }
  ASSERT_FALSE(dev->destroy_qp(qp));
}

TEST(Srq, LimitEventFiresOnceBelowTheLimit) {
  Env env(Net::kSim);
  Node a = env.make_node(1, QpType::kRC, 4096, kAll);
  Node b;
  Srq* srq = srq_node(env, a, b, [](Device&) {});
  AsyncEvent ev;
  ASSERT_FALSE(b.dev->get_async_event(&ev));  // PORT_ACTIVE
  for (uint64_t i = 0; i < 4; ++i) {
    Sge sge{b.addr() + i * 100, 100, b.mr->lkey()};
    RecvWr r;
    r.wr_id = i;
    r.sg_list = std::span<const Sge>(&sge, 1);
    ASSERT_FALSE(srq->post_recv(std::span<const RecvWr>(&r, 1), nullptr));
  }
  ASSERT_FALSE(srq->modify(SrqAttr{0, 0, 3}, srq_attr::kLimit));
  fcntl(b.dev->async_fd(), F_SETFL, O_NONBLOCK);
  Sge s{a.addr(), 10, a.mr->lkey()};
  ASSERT_FALSE(post_send(a.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  ASSERT_EQ(env.wait_wcs(b.rcq, 1, {a.dev.get(), b.dev.get()}).size(), 1u);
  EXPECT_EQ(b.dev->get_async_event(&ev), std::errc::resource_unavailable_try_again);  // 3 left: not below
  ASSERT_FALSE(post_send(a.qp, make_wr(WrOpcode::kSend, &s, 1, 2)));
  ASSERT_EQ(env.wait_wcs(b.rcq, 1, {a.dev.get(), b.dev.get()}).size(), 1u);
  ASSERT_FALSE(b.dev->get_async_event(&ev));
  EXPECT_EQ(ev.event_type, EventType::kSrqLimitReached);
  EXPECT_EQ(ev.srq, srq);
  EXPECT_EQ(srq->query().srq_limit, 0u);  // disarmed
}

// Async events wait in queues, one per open device file in uverbs: an
// object's events on the queue it was given, port events on every queue, and
// nothing of one queue's on another's fd.
TEST(AsyncQueues, AnObjectsEventsGoToItsQueueOnly) {
  Env env(Net::kSim);
  Node a = env.make_node(1, QpType::kRC, 4096, kAll);
  Node b;
  Result<uint32_t> q1 = std::make_error_code(std::errc::invalid_argument), q2 = q1;
  Srq* srq = srq_node(env, a, b, [&](Device& d) {
    q1 = d.open_async_queue();
    q2 = d.open_async_queue();
  });
  ASSERT_TRUE(q1 && q2);
  ASSERT_NE(*q1, *q2);
  b.dev->set_async_queue(srq, *q2);
  const int fd0 = b.dev->async_fd(), fd1 = b.dev->async_fd(*q1), fd2 = b.dev->async_fd(*q2);
  EXPECT_TRUE(fd0 >= 0 && fd1 >= 0 && fd2 >= 0 && fd0 != fd1 && fd1 != fd2 && fd0 != fd2);
  AsyncEvent ev;
  for (uint32_t q : {0u, *q1, *q2}) {  // each starts with PORT_ACTIVE
    ASSERT_FALSE(b.dev->get_async_event(&ev, {}, q));
    EXPECT_EQ(ev.event_type, EventType::kPortActive);
  }
  for (uint64_t i = 0; i < 2; ++i) {
    Sge sge{b.addr() + i * 100, 100, b.mr->lkey()};
    RecvWr r;
    r.wr_id = i;
    r.sg_list = std::span<const Sge>(&sge, 1);
    ASSERT_FALSE(srq->post_recv(std::span<const RecvWr>(&r, 1), nullptr));
  }
  ASSERT_FALSE(srq->modify(SrqAttr{0, 0, 2}, srq_attr::kLimit));
  Sge s{a.addr(), 10, a.mr->lkey()};
  ASSERT_FALSE(post_send(a.qp, make_wr(WrOpcode::kSend, &s, 1, 1)));
  ASSERT_EQ(env.wait_wcs(b.rcq, 1, {a.dev.get(), b.dev.get()}).size(), 1u);
  EXPECT_FALSE(readable(fd0));
  EXPECT_FALSE(readable(fd1));
  ASSERT_TRUE(readable(fd2));
  ASSERT_FALSE(b.dev->get_async_event(&ev, {}, *q2));
  EXPECT_EQ(ev.event_type, EventType::kSrqLimitReached);
  EXPECT_EQ(ev.srq, srq);
  EXPECT_FALSE(readable(fd2));
  // A closed queue is gone: its fd closed, EINVAL; queue 0 cannot be closed.
  EXPECT_FALSE(b.dev->close_async_queue(*q1));
  EXPECT_EQ(b.dev->async_fd(*q1), -1);
  EXPECT_EQ(b.dev->get_async_event(&ev, {}, *q1), std::errc::invalid_argument);
  EXPECT_EQ(b.dev->close_async_queue(*q1), std::errc::invalid_argument);
  EXPECT_EQ(b.dev->close_async_queue(0), std::errc::invalid_argument);
  EXPECT_FALSE(b.dev->close_async_queue(*q2));
}

class UdGrh : public ::testing::TestWithParam<Net> {};

// IBTA 11.4.1.1 / rxe: 40 bytes of GRH ahead of the payload; IPv4: bytes 0-19
// zero, the IPv4 header in 20-39.
TEST_P(UdGrh, ReceiveBufferStartsWithTheGrh) {
  Env env(GetParam());
  Node a = env.make_node(1, QpType::kUD, 4096, kAll);
  Node b = env.make_node(2, QpType::kUD, 4096, kAll);
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
  AhAttr aa;
  ASSERT_FALSE(b.dev->query_gid(1, 0, &aa.dgid));
  Ah* ah = *a.dev->create_ah(a.pd, aa);
  std::fill(b.buf.begin(), b.buf.end(), std::byte{0xAA});
  ASSERT_FALSE(post_recv(b.qp, b.addr(), 1000, b.mr->lkey(), 1));
  fill_pattern(a.buf, 0, 300, 4);
  Sge s{a.addr(), 300, a.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kSend, &s, 1, 1);
  wr.ud = {ah, b.qp->qp_num(), 0x11111111};
  ASSERT_FALSE(post_send(a.qp, wr));
  auto wcs = env.wait_wcs(b.rcq, 1, {a.dev.get(), b.dev.get()});
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].byte_len, 340u);
  EXPECT_TRUE(wcs[0].wc_flags & wc_flags::kGrh);
  EXPECT_EQ(wcs[0].src_qp, a.qp->qp_num());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(b.buf[i], std::byte{0}) << i;
  const std::byte* ip = b.buf.data() + 20;
  EXPECT_EQ(wire::load8(ip), 0x45);      // IPv4, IHL 5
  EXPECT_EQ(wire::load8(ip + 9), 17);    // UDP
  EXPECT_EQ(wire::load_be16(ip + 2), 20 + 8 + 12 + 8 + 300 + 4);  // IP total length
  EXPECT_EQ(std::memcmp(ip + 12, &a.dev->address().b[0], 4), 0);  // source address
  EXPECT_EQ(std::memcmp(ip + 16, &b.dev->address().b[0], 4), 0);  // destination
  EXPECT_EQ(std::memcmp(b.buf.data() + 40, a.buf.data(), 300), 0);
  EXPECT_EQ(b.buf[340], std::byte{0xAA});
}

TEST_P(UdGrh, WrongQkeyIsDropped) {
  Env env(GetParam());
  Node a = env.make_node(1, QpType::kUD, 4096, kAll);
  Node b = env.make_node(2, QpType::kUD, 4096, kAll);
  ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
  AhAttr aa;
  ASSERT_FALSE(b.dev->query_gid(1, 0, &aa.dgid));
  Ah* ah = *a.dev->create_ah(a.pd, aa);
  ASSERT_FALSE(post_recv(b.qp, b.addr(), 1000, b.mr->lkey(), 1));
  Sge s{a.addr(), 30, a.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kSend, &s, 1, 1);
  wr.ud = {ah, b.qp->qp_num(), 0x22222222};
  ASSERT_FALSE(post_send(a.qp, wr));
  EXPECT_EQ(env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()}).size(), 1u);  // UD completes at send
  for (int i = 0; i < 200 && b.dev->counters().qkey_viol == 0; ++i) env.step({a.dev.get(), b.dev.get()});
  EXPECT_EQ(b.dev->counters().qkey_viol, 1u);
  Wc wc;
  EXPECT_EQ(b.rcq->poll(std::span<Wc>(&wc, 1)), 0);
}

// A QP's UDP source port is reserved when the QP is created (transport.h):
// when another socket holds the port its QPN hashes to on the device's
// address, the QP sends from another one, and the peer accepts its packets
// (the ICRC covers the port actually used).
TEST(UdpSourcePort, AQpPassesOverAPortAnotherSocketHolds) {
  Env env(Net::kUdp);
  Node a = env.make_node(1, QpType::kUD, 4096, kAll);
  Node c = env.make_node(3, QpType::kUD, 4096, kAll);
  if (!a.dev || !c.dev) GTEST_SKIP() << "no free 127.0.0.x address";
  const uint32_t next_qpn = a.qp->qp_num() + 1;  // QPNs are handed out in order
  const uint16_t wanted = preferred_source_port(next_qpn);
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(wanted);
  std::memcpy(&sin.sin_addr, &a.dev->address().b[0], 4);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0) << std::strerror(errno);

  QpInitAttr ia;
  ia.send_cq = a.scq;
  ia.recv_cq = a.rcq;
  ia.qp_type = QpType::kUD;
  ia.cap = {8, 8, 1, 1, 0};
  auto qp2 = a.dev->create_qp(a.pd, ia);
  ASSERT_TRUE(qp2.ok());
  ASSERT_EQ((*qp2)->qp_num(), next_qpn);
  ASSERT_FALSE(connect_pair(*a.dev, **qp2, *c.dev, *c.qp, ConnectOptions{}));

  struct Sports : PacketTap {
    std::vector<uint16_t> rx;
    void on_packet(Direction dir, Nanos, const Datagram& d) override {
      if (dir == Direction::kRx) rx.push_back(d.ip.sport);
    }
  } sports;
  c.dev->set_tap(&sports);
  AhAttr aa;
  ASSERT_FALSE(c.dev->query_gid(1, 0, &aa.dgid));
  Ah* ah = *a.dev->create_ah(a.pd, aa);
  ASSERT_FALSE(post_recv(c.qp, c.addr(), 1000, c.mr->lkey(), 1));
  Sge s{a.addr(), 64, a.mr->lkey()};
  SendWr wr = make_wr(WrOpcode::kSend, &s, 1, 1);
  wr.ud = {ah, c.qp->qp_num(), 0x11111111};
  ASSERT_FALSE(post_send(*qp2, wr));
  auto wcs = env.wait_wcs(c.rcq, 1, {a.dev.get(), c.dev.get()});
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].src_qp, next_qpn);
  c.dev->set_tap(nullptr);
  ASSERT_EQ(sports.rx.size(), 1u);
  EXPECT_NE(sports.rx[0], wanted);
  EXPECT_GE(sports.rx[0], 0xC000);
  EXPECT_EQ(c.dev->counters().rcvd_icrc_err, 0u);
  ::close(fd);
}

INSTANTIATE_TEST_SUITE_P(Nets, UdGrh, ::testing::Values(Net::kSim, Net::kUdp),
                         [](const auto& p) { return std::string(to_string(p.param)); });

}  // namespace
}  // namespace rocelab::emu::test
