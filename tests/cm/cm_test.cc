// src/cm between two "processes" (each a device with its own Cm), on the
// simulated fabric and on real UDP sockets: connect / accept / reject with
// private data, the QP attributes both sides derive, data over the QPs they
// set up, disconnect, SIDR, many connections, errors. The losses that need
// CM timeouts (seconds) run on the fabric, in virtual time.
#include <gtest/gtest.h>

#include <poll.h>

#include <random>

#include <cerrno>
#include <map>
#include <set>
#include <tuple>

#include "tests/cm/cm_env.h"
#include "wire/cm_mad.h"
#include "wire/cma_hdr.h"
#include "wire/gsi.h"
#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace rocelab::cm::test {
namespace {

class CmTest : public ::testing::TestWithParam<Net> {
 protected:
  CmEnv env{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Nets, CmTest, ::testing::Values(Net::kSim, Net::kUdp),
                         [](const auto& i) { return std::string(to_string(i.param)); });

TEST_P(CmTest, ConnectAcceptEstablishWithPrivateDataBothWays) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c = connect_pair(env, a, b);
  // CONNECT_REQUEST: the listener, the new id, the REQ's parameters and data.
  EXPECT_EQ(c.req.listen_id, c.listen);
  EXPECT_NE(c.req.id, c.listen);
  EXPECT_EQ(c.req.private_data_len, 56);  // 92 - rdma_cm's 36-byte header
  EXPECT_EQ(text(c.req), "hello from A");
  EXPECT_EQ(c.req.conn.qp_num, c.qa->qp_num());
  EXPECT_EQ(c.req.conn.responder_resources, 1);
  EXPECT_EQ(c.req.conn.initiator_depth, 1);
  EXPECT_EQ(c.req.conn.retry_count, 7);
  EXPECT_EQ(c.req.conn.rnr_retry_count, 7);
  // CONNECT_RESPONSE: the REP's.
  EXPECT_EQ(c.rep.private_data_len, 196);
  EXPECT_EQ(text(c.rep), "welcome from B");
  EXPECT_EQ(c.rep.conn.qp_num, c.qb->qp_num());
  // The passive id knows both ends from the rdma_cm header.
  auto ib = b.cm->query(c.b);
  auto ia = a.cm->query(c.a);
  ASSERT_TRUE(ib.ok() && ia.ok());
  EXPECT_EQ(ib->src, b.at(kPort));
  EXPECT_EQ(ib->dst, ia->src);
  EXPECT_EQ(ia->dst, b.at(kPort));
  EXPECT_GE(ia->src.port, 32768);
  EXPECT_EQ(ib->state, IdState::kEstablished);
  EXPECT_EQ(ia->state, IdState::kEstablished);
  EXPECT_EQ(ia->device, a.dev.get());
  EXPECT_EQ(ia->port_num, 1);
  send_a_to_b(env, a, b, c, "data over the CM's QPs");
}

TEST_P(CmTest, BothSidesDeriveMatchingQpAttributes) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c = connect_pair(env, a, b);
  emu::QpAttr ra, rb, sa, sb;
  uint32_t m = 0;
  ASSERT_FALSE(a.cm->init_qp_attr(c.a, emu::QpState::kRtr, &ra, &m));
  ASSERT_FALSE(b.cm->init_qp_attr(c.b, emu::QpState::kRtr, &rb, &m));
  ASSERT_FALSE(a.cm->init_qp_attr(c.a, emu::QpState::kRts, &sa, &m));
  ASSERT_FALSE(b.cm->init_qp_attr(c.b, emu::QpState::kRts, &sb, &m));
  EXPECT_EQ(ra.dest_qp_num, c.qb->qp_num());
  EXPECT_EQ(rb.dest_qp_num, c.qa->qp_num());
  EXPECT_EQ(sa.sq_psn, rb.rq_psn);  // what A sends from is what B expects
  EXPECT_EQ(sb.sq_psn, ra.rq_psn);
  EXPECT_EQ(ra.ah_attr.dgid, b.addr().gid());
  EXPECT_EQ(rb.ah_attr.dgid, a.addr().gid());
  EXPECT_EQ(ra.path_mtu, rb.path_mtu);
  EXPECT_EQ(sa.retry_cnt, 7);
  EXPECT_EQ(sb.rnr_retry, 7);
  EXPECT_EQ(sa.timeout, 19);  // cm_ack_timeout(15, 18), as in the Soft-RoCE captures
  EXPECT_EQ(sa.max_rd_atomic, 1);
  EXPECT_EQ(ra.max_dest_rd_atomic, 1);
  // The QPs carry them.
  emu::QpAttr qa, qb;
  emu::QpInitAttr ia;
  ASSERT_FALSE(c.qa->query(&qa, &ia));
  ASSERT_FALSE(c.qb->query(&qb, &ia));
  EXPECT_EQ(qa.sq_psn, qb.rq_psn);
  EXPECT_EQ(qb.sq_psn, qa.rq_psn);
  EXPECT_EQ(qa.dest_qp_num, c.qb->qp_num());
  EXPECT_EQ(qb.dest_qp_num, c.qa->qp_num());
}

TEST_P(CmTest, RejectCarriesPrivateDataAndReason28) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c;
  listen_on(env, b, &c.listen);
  start_connect(env, a, b, &c, "may I?");
  Event req = env.expect_event(b, EventType::kConnectRequest);
  auto no = bytes("no, go away");
  ASSERT_FALSE(b.cm->reject(req.id, no));
  Event rej = env.expect_event(a, EventType::kRejected);
  EXPECT_EQ(rej.status, wire::rej_reason::kConsumerReject);
  EXPECT_EQ(rej.private_data_len, 148);
  EXPECT_EQ(text(rej), "no, go away");
  EXPECT_EQ(b.cm->accept(req.id, {}), std::errc::invalid_argument);  // already rejected
}

TEST_P(CmTest, NobodyListeningIsRejectedWithInvalidServiceId) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c;
  const Nanos t0 = env.now();
  start_connect(env, a, b, &c, "anyone?");
  Event rej = env.expect_event(a, EventType::kRejected);
  EXPECT_EQ(rej.status, wire::rej_reason::kInvalidServiceId);  // 8
  if (env.net() == Net::kSim) {
    EXPECT_LT(env.now() - t0, 1s);  // answered, not timed out
  }
}

TEST_P(CmTest, DisconnectFromEitherSide) {
  for (bool from_a : {true, false}) {
    SCOPED_TRACE(from_a ? "A disconnects" : "B disconnects");
    CmEnv e(GetParam());
    Side a = e.make_side(1), b = e.make_side(2);
    ASSERT_TRUE(a.cm && b.cm);
    Conn c = connect_pair(e, a, b);
    Side& x = from_a ? a : b;
    Side& y = from_a ? b : a;
    const IdHandle xi = from_a ? c.a : c.b, yi = from_a ? c.b : c.a;
    ASSERT_FALSE(x.cm->disconnect(xi));
    Event dy = e.expect_event(y, EventType::kDisconnected);
    EXPECT_EQ(dy.id, yi);
    ASSERT_FALSE(y.cm->disconnect(yi));  // sends the DREP
    Event dx = e.expect_event(x, EventType::kDisconnected);
    EXPECT_EQ(dx.status, 0);
    EXPECT_FALSE(x.cm->disconnect(xi));  // again: nothing to do, no error
    EXPECT_EQ(x.cm->stats().mads_resent, 0u);
  }
}

TEST_P(CmTest, CrossedDisconnectRequests) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c = connect_pair(env, a, b);
  ASSERT_FALSE(a.cm->disconnect(c.a));
  ASSERT_FALSE(b.cm->disconnect(c.b));  // before A's DREQ arrives
  Event da = env.expect_event(a, EventType::kDisconnected);
  Event db = env.expect_event(b, EventType::kDisconnected);
  EXPECT_EQ(da.status, 0);
  EXPECT_EQ(db.status, 0);
  env.run_for(50ms);
  Event more;
  EXPECT_EQ(a.cm->get_event(a.cm_ch, &more), std::errc::resource_unavailable_try_again);
  EXPECT_EQ(b.cm->get_event(b.cm_ch, &more), std::errc::resource_unavailable_try_again);
}

TEST_P(CmTest, ManyConnectionsOnOneListener) {
  Side b = env.make_side(2);
  ASSERT_TRUE(b.cm);
  IdHandle lid;
  listen_on(env, b, &lid, 16);
  constexpr int kN = 6;
  std::vector<Side> as;
  std::vector<Conn> cs(kN);
  for (int i = 0; i < kN; ++i) {
    as.push_back(env.make_side(static_cast<uint8_t>(10 + i)));
    ASSERT_TRUE(as.back().cm);
  }
  for (int i = 0; i < kN; ++i) {
    cs[i].listen = lid;
    start_connect(env, as[i], b, &cs[i], "client " + std::to_string(i));
  }
  std::set<std::string> seen;
  for (int i = 0; i < kN; ++i) {
    Event req = env.expect_event(b, EventType::kConnectRequest);
    seen.insert(text(req));
    // Find which A it is by the QPN it announced.
    int who = -1;
    for (int j = 0; j < kN; ++j)
      if (cs[j].qa->qp_num() == req.conn.qp_num && as[j].addr() == b.cm->query(req.id)->dst.ip) who = j;
    ASSERT_GE(who, 0);
    Conn& c = cs[who];
    c.b = req.id;
    c.qb = make_qp(b);
    move_qp(b, c.b, c.qb, emu::QpState::kInit);
    move_qp(b, c.b, c.qb, emu::QpState::kRtr);
    move_qp(b, c.b, c.qb, emu::QpState::kRts);
    ConnParam p;
    p.qp_num = c.qb->qp_num();
    ASSERT_FALSE(b.cm->accept(c.b, p));
  }
  EXPECT_EQ(seen.size(), size_t{kN});
  for (int i = 0; i < kN; ++i) {
    env.expect_event(as[i], EventType::kConnectResponse);
    move_qp(as[i], cs[i].a, cs[i].qa, emu::QpState::kRtr);
    move_qp(as[i], cs[i].a, cs[i].qa, emu::QpState::kRts);
    ASSERT_FALSE(as[i].cm->establish(cs[i].a));
  }
  for (int i = 0; i < kN; ++i) env.expect_event(b, EventType::kEstablished);
  send_a_to_b(env, as[3], b, cs[3], "to the 4th connection");
}

TEST_P(CmTest, BacklogFullRejectsTheRest) {
  Side b = env.make_side(2);
  ASSERT_TRUE(b.cm);
  IdHandle lid;
  listen_on(env, b, &lid, 2);
  std::vector<Side> as;
  std::vector<Conn> cs(4);
  for (int i = 0; i < 4; ++i) {
    as.push_back(env.make_side(static_cast<uint8_t>(20 + i)));
    ASSERT_TRUE(as.back().cm);
    start_connect(env, as[i], b, &cs[i], "x");
  }
  // Nobody takes B's events: two fit the backlog, two are refused (REJ 28).
  int rejected = 0;
  for (int i = 0; i < 4; ++i) {
    env.run_for(100ms);
    Event ev;
    if (!as[i].cm->get_event(as[i].cm_ch, &ev)) {
      EXPECT_EQ(ev.type, EventType::kRejected);
      EXPECT_EQ(ev.status, wire::rej_reason::kConsumerReject);
      ++rejected;
    }
  }
  EXPECT_EQ(rejected, 2);
  Event ev;
  int requests = 0;
  while (!b.cm->get_event(b.cm_ch, &ev)) requests += ev.type == EventType::kConnectRequest;
  EXPECT_EQ(requests, 2);
}

TEST_P(CmTest, SidrResolvesQpnAndQkey) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  auto l = b.cm->create_id(b.cm_ch, PortSpace::kUdp, emu::QpType::kUD);
  ASSERT_TRUE(l.ok());
  ASSERT_FALSE(b.cm->bind(*l, b.at(kPort)));
  ASSERT_FALSE(b.cm->listen(*l, 4));
  IdHandle aid = resolve(env, a, b.at(kPort), PortSpace::kUdp, emu::QpType::kUD);
  ConnParam p;
  auto pd = bytes("udp hello");
  p.private_data = pd;
  ASSERT_FALSE(a.cm->connect(aid, p));
  Event req = env.expect_event(b, EventType::kConnectRequest);
  EXPECT_EQ(req.private_data_len, 180);
  EXPECT_EQ(text(req), "udp hello");
  EXPECT_EQ(req.ud.ah_attr.dgid, a.addr().gid());
  emu::Qp* qb = make_qp(b, emu::QpType::kUD);
  ConnParam acc;
  acc.qp_num = qb->qp_num();
  auto back = bytes("udp welcome");
  acc.private_data = back;
  ASSERT_FALSE(b.cm->accept(req.id, acc));
  Event est = env.expect_event(a, EventType::kEstablished);
  EXPECT_EQ(est.ud.qp_num, qb->qp_num());
  EXPECT_EQ(est.ud.qkey, 0x01234567u);
  EXPECT_EQ(est.ud.ah_attr.dgid, b.addr().gid());
  EXPECT_EQ(text(est), "udp welcome");
  emu::QpAttr ia;
  uint32_t mask = 0;
  ASSERT_FALSE(a.cm->init_qp_attr(aid, emu::QpState::kInit, &ia, &mask));
  EXPECT_EQ(ia.qkey, 0x01234567u);
  EXPECT_TRUE(mask & emu::qp_attr::kQkey);
}

TEST_P(CmTest, SidrWithoutListenerOrRejectedIsUnreachableWithTheSidrStatus) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  IdHandle aid = resolve(env, a, b.at(kPort), PortSpace::kUdp, emu::QpType::kUD);
  ASSERT_FALSE(a.cm->connect(aid, {}));
  Event ev = env.expect_event(a, EventType::kUnreachable);
  EXPECT_EQ(ev.status, wire::sidr_status::kServiceIdNotSupported);

  auto l = b.cm->create_id(b.cm_ch, PortSpace::kUdp, emu::QpType::kUD);
  ASSERT_FALSE(b.cm->bind(*l, b.at(kPort)));
  ASSERT_FALSE(b.cm->listen(*l, 4));
  IdHandle a2 = resolve(env, a, b.at(kPort), PortSpace::kUdp, emu::QpType::kUD);
  ASSERT_FALSE(a.cm->connect(a2, {}));
  Event req = env.expect_event(b, EventType::kConnectRequest);
  ASSERT_FALSE(b.cm->reject(req.id, {}));
  ev = env.expect_event(a, EventType::kUnreachable);
  EXPECT_EQ(ev.status, wire::sidr_status::kRejected);
}

TEST_P(CmTest, AListenAnotherProcessHoldsIsRefused) {
  // Another process at the device's address listens on kPort's TCP service
  // (CmConfig::listened_elsewhere answers for it, as the shim's address group does).
  const uint64_t taken = wire::rdma_cm_service_id(static_cast<uint16_t>(PortSpace::kTcp), kPort);
  std::vector<uint64_t> asked;
  CmConfig cfg;
  cfg.listened_elsewhere = [&](emu::Device&, uint64_t sid) {
    asked.push_back(sid);
    return sid == taken;
  };
  Side a = env.make_side(1, "", true, cfg);
  ASSERT_TRUE(a.cm);
  for (const SockAddr& where : {a.at(kPort), SockAddr{wire::IpAddr{}, kPort}}) {  // its address, the wildcard
    auto id = a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
    ASSERT_FALSE(a.cm->bind(*id, where));
    EXPECT_EQ(a.cm->listen(*id, 4), std::errc::address_in_use);
    EXPECT_FALSE(a.cm->destroy_id(*id));
  }
  auto other = a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  ASSERT_FALSE(a.cm->bind(*other, a.at(kPort + 1)));
  EXPECT_FALSE(a.cm->listen(*other, 4));
  EXPECT_EQ(asked, (std::vector<uint64_t>{taken, taken, taken + 1}));
}

TEST_P(CmTest, BadCallsGiveTheErrnoLibrdmacmGives) {
  Side a = env.make_side(1);
  ASSERT_TRUE(a.cm);
  auto id = a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(a.cm->create_id(a.cm_ch, PortSpace::kUdp, emu::QpType::kRC).error(), std::errc::invalid_argument);
  EXPECT_EQ(a.cm->create_id(999, PortSpace::kTcp, emu::QpType::kRC).error(), std::errc::invalid_argument);
  EXPECT_EQ(a.cm->connect(*id, {}), std::errc::invalid_argument);         // no route
  EXPECT_EQ(a.cm->resolve_route(*id, 100), std::errc::invalid_argument);  // no address
  EXPECT_EQ(a.cm->accept(*id, {}), std::errc::invalid_argument);
  EXPECT_EQ(a.cm->disconnect(*id), std::errc::invalid_argument);
  EXPECT_EQ(a.cm->bind(*id, {wire::IpAddr::v4(192, 0, 2, 99), 1}), std::errc::address_not_available);
  // A loopback address no device has binds without a device (id->verbs NULL).
  for (const auto& lo : {wire::IpAddr::v4(127, 0, 0, 1), *wire::IpAddr::parse("::1")}) {
    if (a.addr() == lo) continue;
    auto l = a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
    ASSERT_FALSE(a.cm->bind(*l, {lo, 0}));
    EXPECT_FALSE(a.cm->query(*l)->bound);
    EXPECT_EQ(a.cm->query(*l)->device, nullptr);
    EXPECT_NE(a.cm->query(*l)->src.port, 0);
    EXPECT_FALSE(a.cm->destroy_id(*l));
  }
  ASSERT_FALSE(a.cm->bind(*id, a.at(kPort)));
  EXPECT_EQ(a.cm->bind(*id, a.at(kPort + 1)), std::errc::invalid_argument);  // bound already
  auto id2 = a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  EXPECT_EQ(a.cm->bind(*id2, a.at(kPort)), std::errc::address_in_use);
  EXPECT_EQ(a.cm->bind(*id2, {wire::IpAddr{}, kPort}), std::errc::address_in_use);  // wildcard overlaps
  auto id3 = a.cm->create_id(a.cm_ch, PortSpace::kUdp, emu::QpType::kUD);
  EXPECT_FALSE(a.cm->bind(*id3, a.at(kPort)));  // another port space
  // Port 0: one is picked.
  auto id4 = a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  ASSERT_FALSE(a.cm->bind(*id4, a.at(0)));
  EXPECT_NE(a.cm->query(*id4)->src.port, 0);
  EXPECT_EQ(a.cm->destroy_id(12345), std::errc::no_such_file_or_directory);
  EXPECT_EQ(a.cm->destroy_channel(a.cm_ch), std::errc::device_or_resource_busy);
  Event ev;
  EXPECT_EQ(a.cm->get_event(a.cm_ch, &ev), std::errc::resource_unavailable_try_again);
  EXPECT_FALSE(a.cm->destroy_id(*id));
  EXPECT_EQ(a.cm->query(*id).error(), std::errc::no_such_file_or_directory);
}

TEST_P(CmTest, ReuseaddrLetsTwoIdsShareAPort) {
  Side a = env.make_side(1);
  ASSERT_TRUE(a.cm);
  auto x = *a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  auto y = *a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  ASSERT_FALSE(a.cm->set_reuseaddr(x, true));
  ASSERT_FALSE(a.cm->set_reuseaddr(y, true));
  ASSERT_FALSE(a.cm->bind(x, a.at(9000)));
  EXPECT_FALSE(a.cm->bind(y, a.at(9000)));
  EXPECT_EQ(a.cm->set_reuseaddr(y, false), std::errc::invalid_argument);  // after bind
}

TEST_P(CmTest, ChannelFdIsReadableWhileEventsAreQueued) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  const int fd = a.cm->channel_fd(a.cm_ch);
  ASSERT_GE(fd, 0);
  auto readable = [&] {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  };
  EXPECT_FALSE(readable());
  auto id = *a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  ASSERT_FALSE(a.cm->resolve_addr(id, std::nullopt, b.at(kPort), 1000));
  EXPECT_TRUE(readable());
  ASSERT_FALSE(a.cm->resolve_route(id, 1000));  // a second event queued
  Event ev;
  ASSERT_FALSE(a.cm->get_event(a.cm_ch, &ev));
  EXPECT_EQ(ev.type, EventType::kAddrResolved);
  EXPECT_TRUE(readable());
  ASSERT_FALSE(a.cm->get_event(a.cm_ch, &ev));
  EXPECT_EQ(ev.type, EventType::kRouteResolved);
  EXPECT_FALSE(readable());
  // Events of a destroyed id are dropped, and the fd says so.
  ASSERT_FALSE(a.cm->set_context(id, &ev));
  auto id2 = *a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC, &ev);
  ASSERT_FALSE(a.cm->resolve_addr(id2, std::nullopt, b.at(kPort), 1000));
  EXPECT_TRUE(readable());
  ASSERT_FALSE(a.cm->destroy_id(id2));
  EXPECT_FALSE(readable());
}

TEST_P(CmTest, DestroyingAConnectedIdDisconnectsThePeer) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c = connect_pair(env, a, b);
  ASSERT_FALSE(a.cm->destroy_id(c.a));
  env.expect_event(b, EventType::kDisconnected);
  ASSERT_FALSE(b.cm->disconnect(c.b));
  env.run_for(100ms);
  EXPECT_EQ(b.cm->stats().mads_resent, 0u);  // the DREP reached A's CM: no DREQ resends
}

// The process of one side exits without rdma_disconnect: the rdma_cm shim's
// exit handler removes its device from the Cm, which says goodbye as the
// kernel does for a process that exits (a DREQ): the peer gets DISCONNECTED,
// not silence.
TEST_P(CmTest, RemovingTheDeviceOfAConnectedIdDisconnectsThePeer) {
  Side a = env.make_side(1), b = env.make_side(2);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c = connect_pair(env, a, b);
  ASSERT_FALSE(a.cm->remove_device(*a.dev));
  env.expect_event(a, EventType::kDeviceRemoval);
  Event d = env.expect_event(b, EventType::kDisconnected);
  EXPECT_EQ(d.id, c.b);
  // B's DREP finds nobody on A's QP 1 (no GSI client: dropped); B's own
  // disconnect is local.
  EXPECT_FALSE(b.cm->disconnect(c.b));
}

// While a connection is established each side leaves, through
// CmConfig::farewell, the DREQ its end would send: a whole datagram (IP, UDP,
// BTH, DETH, the MAD, a correct ICRC) from its QP 1 to the peer's, naming the
// connection's comm IDs and the peer's QPN. It is withdrawn once the
// connection is disconnected. (What the rdma_cm shim's reaper sends for a
// killed process: tests/rdmacm, rdmacm.killed_idle_peer.)
TEST_P(CmTest, AnEstablishedConnectionLeavesItsDreqUntilItEnds) {
  std::map<uint32_t, std::vector<std::byte>> wills_a, wills_b;
  int withdrawn_a = 0;
  CmConfig ca, cb;
  ca.farewell = [&](uint32_t comm, std::span<const std::byte> dg) {
    if (dg.empty()) {
      withdrawn_a += wills_a.erase(comm) ? 1 : 0;
    } else {
      wills_a[comm].assign(dg.begin(), dg.end());
    }
  };
  cb.farewell = [&](uint32_t comm, std::span<const std::byte> dg) {
    if (dg.empty()) {
      wills_b.erase(comm);
    } else {
      wills_b[comm].assign(dg.begin(), dg.end());
    }
  };
  Side a = env.make_side(1, "", true, ca), b = env.make_side(2, "", true, cb);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c = connect_pair(env, a, b);
  env.run_for(10ms);  // B's RTU
  ASSERT_EQ(wills_a.size(), 1u);
  ASSERT_EQ(wills_b.size(), 1u);
  for (auto* w : {&wills_a, &wills_b}) {
    const bool from_a = w == &wills_a;
    const std::vector<std::byte>& dg = w->begin()->second;
    auto ip = wire::parse_ip_udp(dg);
    ASSERT_TRUE(ip.ok());
    EXPECT_EQ(ip->info.src, from_a ? a.addr() : b.addr());
    EXPECT_EQ(ip->info.dst, from_a ? b.addr() : a.addr());
    EXPECT_EQ(ip->info.dport, wire::kRoceV2Port);
    auto pkt = wire::parse_roce(ip->udp_payload);
    ASSERT_TRUE(pkt.ok());
    EXPECT_TRUE(wire::is_gsi_mad(*pkt));
    EXPECT_EQ(pkt->hdr.bth.dest_qpn.value(), 1u);
    const size_t n = ip->udp_payload.size();
    const uint32_t icrc = wire::load_le32(ip->udp_payload.data() + n - wire::kIcrcLen);
    EXPECT_EQ(wire::compute_icrc(ip->ip_packet, ip->ip_packet.size() - ip->udp_payload.size() - wire::kUdpHeaderLen),
              icrc);
    auto mad = wire::parse_cm_mad(pkt->payload);
    ASSERT_TRUE(mad.ok());
    ASSERT_TRUE(std::holds_alternative<wire::CmDreq>(mad->msg));
    const auto& d = std::get<wire::CmDreq>(mad->msg);
    EXPECT_EQ(d.local_comm_id, w->begin()->first);
    EXPECT_EQ(d.remote_qpn.value(), from_a ? c.qb->qp_num() : c.qa->qp_num());
  }
  ASSERT_FALSE(a.cm->disconnect(c.a));
  env.expect_event(b, EventType::kDisconnected);
  EXPECT_EQ(withdrawn_a, 1);
  EXPECT_TRUE(wills_a.empty());
  EXPECT_TRUE(wills_b.empty());  // B received the DREQ
}

// ---- on the fabric only: losses and timeouts in virtual time ----

class CmSimTest : public ::testing::Test {
 protected:
  CmEnv env{Net::kSim};
};

// MADs a side sends, in order (drop:qpn=1:nth=K drops the K-th).
TEST_F(CmSimTest, LostReqIsResentAndTheConnectionCompletes) {
  Side a = env.make_side(1, "drop:qpn=1:nth=1"), b = env.make_side(2);
  const Nanos t0 = env.now();
  Conn c = connect_pair(env, a, b);
  EXPECT_EQ(a.cm->stats().mads_resent, 1u);
  // The resend waited for the CM response timeout (4.096 us * 2^20) plus
  // twice the packet life time (2^18): 6.44 s.
  EXPECT_GE(env.now() - t0, 6s);
  EXPECT_EQ(text(c.req), "hello from A");
}

TEST_F(CmSimTest, LostRepIsResentAndTheConnectionCompletes) {
  Side a = env.make_side(1), b = env.make_side(2, "drop:qpn=1:nth=1");
  Conn c = connect_pair(env, a, b);
  EXPECT_EQ(c.est.type, EventType::kEstablished);
  // B's REP timer fired and resent it (A's REQ resend may also have come first:
  // then B resent its REP in answer).
  EXPECT_GE(a.cm->stats().mads_resent + b.cm->stats().mads_resent, 1u);
  EXPECT_GE(b.cm->stats().mads_sent, 2u);
}

TEST_F(CmSimTest, LostRtuIsRepairedByTheRepResend) {
  Side a = env.make_side(1, "drop:qpn=1:nth=2"), b = env.make_side(2);
  Conn c = connect_pair(env, a, b);
  EXPECT_EQ(c.est.type, EventType::kEstablished);  // B's ESTABLISHED came after all
  EXPECT_GE(b.cm->stats().mads_resent, 1u);   // B resent the REP
  EXPECT_GE(a.cm->stats().duplicates, 1u);    // A saw it twice and resent the RTU
}

TEST_F(CmSimTest, DataBeforeTheRtuEstablishesThroughNotify) {
  Side a = env.make_side(1, "drop:qpn=1:nth=2"), b = env.make_side(2);
  Conn c;
  listen_on(env, b, &c.listen);
  start_connect(env, a, b, &c, "x");
  Event req = env.expect_event(b, EventType::kConnectRequest);
  c.b = req.id;
  c.qb = make_qp(b);
  move_qp(b, c.b, c.qb, emu::QpState::kInit);
  move_qp(b, c.b, c.qb, emu::QpState::kRtr);
  move_qp(b, c.b, c.qb, emu::QpState::kRts);
  ConnParam p;
  p.qp_num = c.qb->qp_num();
  ASSERT_FALSE(b.cm->accept(c.b, p));
  env.expect_event(a, EventType::kConnectResponse);
  move_qp(a, c.a, c.qa, emu::QpState::kRtr);
  move_qp(a, c.a, c.qa, emu::QpState::kRts);
  ASSERT_FALSE(a.cm->establish(c.a));  // its RTU is lost
  env.run_for(1ms);
  // The first data arrives: librdmacm's program calls rdma_notify(COMM_EST).
  ASSERT_FALSE(b.cm->notify(c.b, emu::EventType::kCommEst));
  Event est = env.expect_event(b, EventType::kEstablished);
  EXPECT_EQ(est.id, c.b);
  env.run_for(20s);  // no REP resends after that, no second ESTABLISHED
  Event more;
  EXPECT_EQ(b.cm->get_event(b.cm_ch, &more), std::errc::resource_unavailable_try_again);
  EXPECT_EQ(b.cm->stats().mads_resent, 0u);
}

TEST_F(CmSimTest, LostDreqIsResentAndBothSidesDisconnect) {
  // A's MADs: REQ, RTU, DREQ: drop the DREQ once.
  Side a = env.make_side(1, "drop:qpn=1:nth=3"), b = env.make_side(2);
  Conn c = connect_pair(env, a, b);
  ASSERT_FALSE(a.cm->disconnect(c.a));
  env.expect_event(b, EventType::kDisconnected);
  ASSERT_FALSE(b.cm->disconnect(c.b));
  Event d = env.expect_event(a, EventType::kDisconnected);
  EXPECT_EQ(d.status, 0);
  EXPECT_EQ(a.cm->stats().mads_resent, 1u);
}

TEST_F(CmSimTest, DuplicateReqWhileTheApplicationThinksGetsAnMra) {
  Side a = env.make_side(1), b = env.make_side(2);
  Conn c;
  listen_on(env, b, &c.listen);
  start_connect(env, a, b, &c, "slow server");
  Event req = env.expect_event(b, EventType::kConnectRequest);
  // B's application takes 20 s to accept: A resends its REQ after 6.4 s, B's
  // CM answers with an MRA, and A waits the MRA's service timeout instead of
  // giving up or resending every 6.4 s.
  env.run_for(20s);
  EXPECT_EQ(a.cm->stats().mads_resent, 1u);  // one resend, then the MRA held it
  EXPECT_EQ(b.cm->stats().duplicates, 1u);
  EXPECT_EQ(b.cm->stats().mads_sent, 1u);    // the MRA
  accept_and_establish(env, a, b, &c, "finally", &req);
  EXPECT_EQ(text(c.rep), "finally");
}

TEST_F(CmSimTest, PeerWithoutCmGivesUnreachableAfterTheRetries) {
  Side a = env.make_side(1), b = env.make_side(2, "", /*with_cm=*/false);
  IdHandle id = resolve(env, a, {b.addr(), kPort});
  ConnParam p;
  p.qp_num = 0x99;
  const Nanos t0 = env.now();
  ASSERT_FALSE(a.cm->connect(id, p));
  Event ev = env.expect_event(a, EventType::kUnreachable, 600s);
  EXPECT_EQ(ev.status, -ETIMEDOUT);
  EXPECT_EQ(a.cm->stats().mads_sent, 16u);  // the REQ and 15 resends
  EXPECT_GE(env.now() - t0, 16 * 6s);
  EXPECT_EQ(b.dev->counters().rcvd_hdr_err, 16u);  // dropped as for an unknown QP
}

TEST_F(CmSimTest, PeerGoneAfterRequestAnswersNothingAndDisconnectTimesOut) {
  // B's process is killed: its CM is gone, its device no longer serves QP 1,
  // and the farewell DREQ of an orderly exit (B's second MAD after its REP)
  // never leaves.
  Side a = env.make_side(1), b = env.make_side(2, "drop:qpn=1:nth=2");
  Conn c = connect_pair(env, a, b);
  ASSERT_FALSE(b.cm->remove_device(*b.dev));
  ASSERT_FALSE(a.cm->disconnect(c.a));
  Event d = env.expect_event(a, EventType::kDisconnected, 600s);
  EXPECT_EQ(d.status, -ETIMEDOUT);
}

TEST_F(CmSimTest, SameCallsGiveTheSamePacketsAtTheSameTimes) {
  auto run = [] {
    CmEnv e(Net::kSim);
    Side a = e.make_side(1, "drop:qpn=1:nth=1"), b = e.make_side(2);
    Conn c = connect_pair(e, a, b);
    return std::make_tuple(e.now(), c.req.conn.qp_num, c.rep.conn.qp_num, a.cm->query(c.a)->src.port);
  };
  EXPECT_EQ(run(), run());
}

// ---- on UDP only ----

TEST(CmUdpTest, ConnectToAnAddressNobodyHoldsIsUnreachableAfterOneResend) {
  CmEnv env(Net::kUdp);
  // Short CM timeouts (0.27 s + 2 x 67 ms per try) to keep the test quick.
  CmConfig cfg;
  cfg.cm_response_timeout = 16;
  cfg.packet_life_time = 14;
  Side a = env.make_side(1, "", true, cfg);
  ASSERT_TRUE(a.cm);
  // An address of the 127.0.0.x pool with no socket behind it: the kernel
  // answers the REQ with ICMP port unreachable, which the UDP transport learns
  // when it next sends there (the REQ's first resend): UNREACHABLE then, not
  // after 15 resends.
  IdHandle id = resolve(env, a, {wire::IpAddr::v4(127, 0, 0, 254), kPort});
  ConnParam p;
  p.qp_num = 0x42;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(a.cm->connect(id, p));
  Event ev = env.expect_event(a, EventType::kUnreachable);
  EXPECT_EQ(ev.status, -ETIMEDOUT);
  EXPECT_LE(a.cm->stats().mads_sent, 3u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(CmUdpTest, AnAddressWithoutRouteIsAnAddrError) {
  CmEnv env(Net::kUdp);
  Side a = env.make_side(1);
  ASSERT_TRUE(a.cm);
  auto id = *a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  // A 127.0.0.x device cannot reach a global address: the kernel's route
  // lookup from a loopback source refuses it, as rdma_resolve_ip would.
  ASSERT_FALSE(a.cm->resolve_addr(id, std::nullopt, {wire::IpAddr::v4(203, 0, 113, 1), kPort}, 1000));
  Event ev = env.expect_event(a, EventType::kAddrError);
  EXPECT_EQ(ev.status, -EHOSTUNREACH);
  EXPECT_EQ(a.cm->resolve_route(id, 1000), std::errc::invalid_argument);
}

}  // namespace
}  // namespace rocelab::cm::test

namespace rocelab::cm::test {
namespace {

// A bare QP 1 client: records the MADs it receives (a hand-made peer).
struct Recorder final : emu::GsiClient {
  std::vector<wire::CmMad> got;
  void on_mad(const emu::GsiMad& m) override {
    auto p = wire::parse_cm_mad(m.mad);
    if (p) got.push_back(*p);
  }
};

void send_raw(emu::Device& from, const wire::IpAddr& to, const wire::CmMad& m) {
  std::array<std::byte, wire::kMadLen> buf{};
  ASSERT_TRUE(wire::encode_cm_mad(buf, m));
  from.run_locked([&] { EXPECT_FALSE(from.send_mad_locked(to, buf)); });
}

TEST_F(CmSimTest, MadsForNoConnectionAreAnsweredAsTheKernelDoes) {
  Side b = env.make_side(2);
  Side x = env.make_side(3, "", /*with_cm=*/false);
  Recorder rec;
  ASSERT_FALSE(x.dev->set_gsi_client(&rec));
  EXPECT_FALSE(x.dev->set_gsi_client(&rec));  // the same client again: fine
  Recorder other;
  EXPECT_EQ(x.dev->set_gsi_client(&other), std::errc::device_or_resource_busy);
  // A REP for no REQ of B's: REJ 6 (invalid comm ID), the comm IDs swapped, the TID echoed.
  wire::CmRep rep;
  rep.local_comm_id = 0x11112222;
  rep.remote_comm_id = 0x33334444;
  send_raw(*x.dev, b.addr(), wire::make_cm_mad(0xABCD, rep));
  // A DREQ for no connection: a DREP.
  wire::CmDreq dreq;
  dreq.local_comm_id = 0x55556666;
  dreq.remote_comm_id = 0x77778888;
  send_raw(*x.dev, b.addr(), wire::make_cm_mad(0xBEEF, dreq));
  // An RTU and a DREP for nothing: dropped, counted.
  wire::CmRtu rtu;
  rtu.remote_comm_id = 0x1;
  send_raw(*x.dev, b.addr(), wire::make_cm_mad(1, rtu));
  send_raw(*x.dev, b.addr(), wire::make_cm_mad(2, wire::CmDrep{}));
  // A REQ for a service nobody listens on: REJ 8.
  wire::CmReq req;
  req.local_comm_id = 0x9999;
  req.service_id = wire::rdma_cm_service_id(wire::rdma_ps::kTcp, 4000);
  wire::CmaHdr hdr;
  hdr.port = 40000;
  hdr.src = x.addr();
  hdr.dst = b.addr();
  std::array<std::byte, wire::kCmaHdrLen> hb{};
  ASSERT_TRUE(wire::encode_cma_hdr(hb, hdr));
  for (size_t i = 0; i < hb.size(); ++i) req.private_data[i] = static_cast<uint8_t>(hb[i]);
  send_raw(*x.dev, b.addr(), wire::make_cm_mad(3, req));
  // Garbage in a MAD's clothes (another management class) and a UD SEND to QP 1 that is no MAD.
  std::array<std::byte, wire::kMadLen> junk{};
  junk[0] = std::byte{1};
  junk[1] = std::byte{0x03};
  x.dev->run_locked([&] { EXPECT_FALSE(x.dev->send_mad_locked(b.addr(), junk)); });
  x.dev->run_locked([&] {
    EXPECT_EQ(x.dev->send_mad_locked(b.addr(), std::span<const std::byte>(junk.data(), 100)),
              std::errc::invalid_argument);
  });
  env.run_for(10ms);
  ASSERT_EQ(rec.got.size(), 3u);
  const auto& rej = std::get<wire::CmRej>(rec.got[0].msg);
  EXPECT_EQ(rec.got[0].hdr.tid, 0xABCDu);
  EXPECT_EQ(rej.reason, wire::rej_reason::kInvalidCommId);
  EXPECT_EQ(rej.message_rejected, wire::CmMsgRef::kRep);
  EXPECT_EQ(rej.local_comm_id, 0x33334444u);
  EXPECT_EQ(rej.remote_comm_id, 0x11112222u);
  const auto& drep = std::get<wire::CmDrep>(rec.got[1].msg);
  EXPECT_EQ(rec.got[1].hdr.tid, 0xBEEFu);
  EXPECT_EQ(drep.local_comm_id, 0x77778888u);
  EXPECT_EQ(drep.remote_comm_id, 0x55556666u);
  const auto& rej8 = std::get<wire::CmRej>(rec.got[2].msg);
  EXPECT_EQ(rej8.reason, wire::rej_reason::kInvalidServiceId);
  EXPECT_EQ(rej8.remote_comm_id, 0x9999u);
  EXPECT_EQ(b.cm->stats().mads_received, 6u);
  EXPECT_EQ(b.cm->stats().mads_dropped, 3u);  // RTU, DREP, the SA-class MAD
  x.dev->set_gsi_client(nullptr);
}

TEST_F(CmSimTest, PacketsToQp1ThatAreNoMadsAreDroppedByTheDevice) {
  Side b = env.make_side(2);
  Side x = env.make_side(3, "", false);
  // A UD QP on x sends to B's QP 1: with the wrong Q_Key, and with the right
  // one (a remote Q_Key with the high bit set means the QP's own, here the
  // GSI's) but 64 bytes: the device drops both before the CM sees them.
  emu::Qp* ud = make_qp(x, emu::QpType::kUD);
  emu::QpAttr a;
  a.qp_state = emu::QpState::kInit;
  a.qkey = 0x80010000;
  ASSERT_FALSE(ud->modify(a, emu::qp_attr::kState | emu::qp_attr::kPkeyIndex | emu::qp_attr::kPort |
                                 emu::qp_attr::kQkey));
  a.qp_state = emu::QpState::kRtr;
  ASSERT_FALSE(ud->modify(a, emu::qp_attr::kState));
  a.qp_state = emu::QpState::kRts;
  ASSERT_FALSE(ud->modify(a, emu::qp_attr::kState | emu::qp_attr::kSqPsn));
  emu::AhAttr ah;
  ah.dgid = b.addr().gid();
  emu::Ah* av = *x.dev->create_ah(x.pd, ah);
  const auto before = b.dev->counters();
  for (uint32_t qkey : {0x1234u, 0x80010000u}) {
    emu::Sge s{reinterpret_cast<uint64_t>(x.buf.data()), 64, x.mr->lkey()};
    emu::SendWr w;
    w.opcode = emu::WrOpcode::kSend;
    w.sg_list = std::span<const emu::Sge>(&s, 1);
    w.ud.ah = av;
    w.ud.remote_qpn = 1;
    w.ud.remote_qkey = qkey;
    size_t n = 0;
    ASSERT_FALSE(ud->post_send(std::span<const emu::SendWr>(&w, 1), &n));
  }
  env.run_for(10ms);
  EXPECT_EQ(b.dev->counters().rcvd_hdr_err - before.rcvd_hdr_err, 2u);
  EXPECT_EQ(b.dev->counters().qkey_viol - before.qkey_viol, 1u);
  EXPECT_EQ(b.cm->stats().mads_received, 0u);
}

}  // namespace
}  // namespace rocelab::cm::test

namespace rocelab::cm::test {
namespace {

// One process, one device, connecting to its own listener (a program that
// runs client and server threads, or cmtime against itself).
TEST_P(CmTest, ConnectToItsOwnAddress) {
  Side a = env.make_side(1);
  ASSERT_TRUE(a.cm);
  Conn c;
  listen_on(env, a, &c.listen);
  start_connect(env, a, a, &c, "to myself");
  Event req = env.expect_event(a, EventType::kConnectRequest);
  EXPECT_EQ(text(req), "to myself");
  c.b = req.id;
  c.qb = make_qp(a);
  move_qp(a, c.b, c.qb, emu::QpState::kInit);
  move_qp(a, c.b, c.qb, emu::QpState::kRtr);
  move_qp(a, c.b, c.qb, emu::QpState::kRts);
  ConnParam p;
  p.qp_num = c.qb->qp_num();
  ASSERT_FALSE(a.cm->accept(c.b, p));
  Event rep = env.expect_event(a, EventType::kConnectResponse);
  EXPECT_EQ(rep.id, c.a);
  move_qp(a, c.a, c.qa, emu::QpState::kRtr);
  move_qp(a, c.a, c.qa, emu::QpState::kRts);
  ASSERT_FALSE(a.cm->establish(c.a));
  Event est = env.expect_event(a, EventType::kEstablished);
  EXPECT_EQ(est.id, c.b);
  send_a_to_b(env, a, a, c, "loop");
  ASSERT_FALSE(a.cm->disconnect(c.a));
  Event d1 = env.expect_event(a, EventType::kDisconnected);
  EXPECT_EQ(d1.id, c.b);
  ASSERT_FALSE(a.cm->disconnect(c.b));
  Event d2 = env.expect_event(a, EventType::kDisconnected);
  EXPECT_EQ(d2.id, c.a);
}

}  // namespace
}  // namespace rocelab::cm::test

namespace rocelab::cm::test {
namespace {

TEST_P(CmTest, MulticastJoinReportsTheGroupGidAndQkey) {
  Side a = env.make_side(1);
  ASSERT_TRUE(a.cm);
  auto id = *a.cm->create_id(a.cm_ch, PortSpace::kUdp, emu::QpType::kUD);
  ASSERT_FALSE(a.cm->bind(id, a.at(0)));
  const SockAddr group{wire::IpAddr::v4(239, 1, 2, 3), 0};
  int ctx = 0;
  EXPECT_EQ(a.cm->join_multicast(id, a.at(0), &ctx), std::errc::invalid_argument);  // not a group
  ASSERT_FALSE(a.cm->join_multicast(id, group, &ctx));
  EXPECT_EQ(a.cm->join_multicast(id, group, &ctx), std::errc::address_in_use);
  Event ev = env.expect_event(a, EventType::kMulticastJoin);
  EXPECT_EQ(ev.ud.ah_attr.dgid, group.ip.gid());  // ::ffff:239.1.2.3
  EXPECT_EQ(ev.ud.qp_num, 0xFFFFFFu);
  EXPECT_EQ(ev.ud.qkey, 0x01234567u);
  EXPECT_EQ(ev.mc_context, &ctx);
  EXPECT_EQ(ev.mc_group, group);
  EXPECT_FALSE(a.cm->leave_multicast(id, group));
  EXPECT_EQ(a.cm->leave_multicast(id, group), std::errc::address_not_available);
}

}  // namespace
}  // namespace rocelab::cm::test

namespace rocelab::cm::test {
namespace {

// 30 % of all MADs lost, both ways: every connect and disconnect still
// completes through the CM's resends (the rping-under-loss judge, in
// miniature and in virtual time).
TEST_F(CmSimTest, ConnectAndDisconnectCompleteUnderHeavyMadLoss) {
  Side a = env.make_side(1, "drop:qpn=1:p=0.3"), b = env.make_side(2, "drop:qpn=1:p=0.3");
  IdHandle lid;
  listen_on(env, b, &lid);
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Conn c;
    c.listen = lid;
    start_connect(env, a, b, &c, "round " + std::to_string(round));
    accept_and_establish(env, a, b, &c, "ok");
    EXPECT_EQ(text(c.req), "round " + std::to_string(round));
    send_a_to_b(env, a, b, c, "payload " + std::to_string(round));
    ASSERT_FALSE(a.cm->disconnect(c.a));
    env.expect_event(b, EventType::kDisconnected);
    ASSERT_FALSE(b.cm->disconnect(c.b));
    Event d = env.expect_event(a, EventType::kDisconnected);
    EXPECT_EQ(d.status, 0);
    ASSERT_FALSE(a.cm->destroy_id(c.a));
    ASSERT_FALSE(b.cm->destroy_id(c.b));
    ASSERT_FALSE(c.qa->modify([] { emu::QpAttr r; r.qp_state = emu::QpState::kErr; return r; }(),
                              emu::qp_attr::kState));
  }
  EXPECT_GT(a.cm->stats().mads_resent + b.cm->stats().mads_resent, 0u);
}

}  // namespace
}  // namespace rocelab::cm::test

namespace rocelab::cm::test {
namespace {

// A hostile peer sends B thousands of CM MADs with random bodies (valid
// headers; attributes REQ ... SIDR_REP; comm IDs now and then those of B's
// live connection): B's CM must neither crash nor wedge — afterwards a new
// connection still completes. Run under ASan by make test-asan.
// B's CM MADs as they leave: the comm IDs of its connection.
struct RepTap final : emu::PacketTap {
  uint32_t local = 0, remote = 0;
  void on_packet(emu::Direction dir, Nanos, const emu::Datagram& d) override {
    if (dir != emu::Direction::kTx) return;
    auto p = wire::parse_roce(d.payload);
    if (!p || !wire::is_gsi_mad(*p)) return;
    auto m = wire::parse_cm_mad(p->payload);
    if (!m) return;
    if (const auto* rep = std::get_if<wire::CmRep>(&m->msg)) {
      local = rep->local_comm_id;
      remote = rep->remote_comm_id;
    }
  }
};

TEST_F(CmSimTest, RandomMadsNeitherCrashNorWedgeTheCm) {
  Side a = env.make_side(1), b = env.make_side(2), x = env.make_side(3, "", false);
  RepTap tap;
  b.dev->set_tap(&tap);
  Conn live = connect_pair(env, a, b);
  b.dev->set_tap(nullptr);
  ASSERT_NE(tap.local, 0u);
  std::mt19937_64 rng(42);
  Recorder rec;  // x hears B's answers (and ignores them)
  ASSERT_FALSE(x.dev->set_gsi_client(&rec));
  for (int i = 0; i < 3000; ++i) {
    std::array<std::byte, wire::kMadLen> m{};
    for (auto& byte : m) byte = std::byte(static_cast<uint8_t>(rng()));
    wire::MadHeader h;
    h.mgmt_class = 0x07;
    h.class_version = 2;
    h.method = wire::mad_method::kSend;
    h.tid = rng();
    h.attr_id = static_cast<uint16_t>(0x10 + rng() % 9);
    h.store(m.data());
    if (rng() % 4 == 0) {
      // Aim at the live connection: the sender's comm ID first, the
      // receiver's second, in most CM messages.
      wire::store_be32(m.data() + wire::kMadHeaderLen, tap.remote);
      wire::store_be32(m.data() + wire::kMadHeaderLen + 4, tap.local);
    }
    x.dev->run_locked([&] { EXPECT_FALSE(x.dev->send_mad_locked(b.addr(), m)); });
    if (i % 50 == 0) env.run_for(1ms);
  }
  env.run_for(1s);
  EXPECT_GT(b.cm->stats().mads_received, 2900u);
  // Still serving: a new connection from A.
  Event ev;
  while (!b.cm->get_event(b.cm_ch, &ev)) {
    if (ev.type == EventType::kConnectRequest) {
      ASSERT_FALSE(b.cm->destroy_id(ev.id));
    }
  }
  while (!a.cm->get_event(a.cm_ch, &ev)) {
  }
  Conn c2;
  c2.listen = live.listen;
  start_connect(env, a, b, &c2, "after the storm");
  accept_and_establish(env, a, b, &c2, "still here");
  EXPECT_EQ(text(c2.req), "after the storm");
  x.dev->set_gsi_client(nullptr);
}

}  // namespace
}  // namespace rocelab::cm::test

namespace rocelab::cm::test {
namespace {

// IPv6 addresses: the rdma_cm header says IP version 6, the GIDs are the
// addresses themselves, and the connection works.
TEST_F(CmSimTest, ConnectsOverIpv6) {
  const auto a6 = *wire::IpAddr::parse("fd00::1"), b6 = *wire::IpAddr::parse("fd00::2");
  Side a = env.make_side(1, "", true, {}, a6), b = env.make_side(2, "", true, {}, b6);
  ASSERT_TRUE(a.cm && b.cm);
  Conn c = connect_pair(env, a, b, "v6 hello");
  EXPECT_EQ(text(c.req), "v6 hello");
  auto ib = b.cm->query(c.b);
  ASSERT_TRUE(ib.ok());
  EXPECT_EQ(ib->dst.ip, a6);
  EXPECT_EQ(ib->dgid, a6.gid());
  emu::QpAttr r;
  uint32_t m = 0;
  ASSERT_FALSE(a.cm->init_qp_attr(c.a, emu::QpState::kRtr, &r, &m));
  EXPECT_EQ(r.ah_attr.dgid, b6.gid());
  send_a_to_b(env, a, b, c, "over IPv6");
  // An IPv4 destination from a process whose only device is IPv6: no route.
  auto id = *a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  ASSERT_FALSE(a.cm->resolve_addr(id, std::nullopt, {wire::IpAddr::v4(10, 0, 0, 2), kPort}, 100));
  Event ev = env.expect_event(a, EventType::kAddrError);
  EXPECT_EQ(ev.status, -ENETUNREACH);
  auto id2 = *a.cm->create_id(a.cm_ch, PortSpace::kTcp, emu::QpType::kRC);
  EXPECT_EQ(a.cm->resolve_addr(id2, SockAddr{a6, 0}, {wire::IpAddr::v4(10, 0, 0, 2), kPort}, 100),
            std::errc::invalid_argument);
}

}  // namespace
}  // namespace rocelab::cm::test
