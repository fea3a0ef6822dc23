// XRC on the wire, read by tshark (the judge): the initiator's requests are
// XRC opcodes (0xA0..) whose XRCETH carries the SRQ number the WR named, the
// target answers with XRC Acknowledges (0xB1), nothing is malformed. (The
// engine checked every ICRC on receipt: the transfer completed.) Label
// `tools` (tshark).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "emu/records/pcap_tap.h"
#include "tests/emu/pair.h"
#include "tests/wire/tshark_fields.h"

namespace rocelab::emu::test {
namespace {

using namespace wire::testutil;

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;

TEST(XrcWire, TsharkReadsXrcSendsTheirXrcethAndTheTargetsAcks) {
  const std::string path = ::testing::TempDir() + "/xrc" + std::to_string(::getpid()) + ".pcap";
  uint32_t srqn = 0, tgt_qpn = 0, ini_qpn = 0;
  {
    Env env(Net::kSim);
    auto a = env.make_device(1);
    auto b = env.make_device(2);
    ASSERT_TRUE(a && b);
    Pd* pa = *a->alloc_pd();
    Pd* pb = *b->alloc_pd();
    Cq* scq = *a->create_cq(16, nullptr, 0);
    Cq* rcq = *b->create_cq(16, nullptr, 0);
    std::vector<std::byte> abuf(4096), bbuf(4096);
    Mr* amr = *a->reg_mr(pa, abuf.data(), abuf.size(), reinterpret_cast<uint64_t>(abuf.data()), kAll);
    Mr* bmr = *b->reg_mr(pb, bbuf.data(), bbuf.size(), reinterpret_cast<uint64_t>(bbuf.data()), kAll);
    Xrcd* x = *b->open_xrcd(0, true, false);
    // A few SRQs first, so that the number named is not 1.
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(b->create_xrc_srq(pb, x, rcq, SrqAttr{4, 1, 0}).ok());
    Srq* srq = *b->create_xrc_srq(pb, x, rcq, SrqAttr{4, 1, 0});
    srqn = srq->srq_num();
    QpInitAttr ia;
    ia.qp_type = QpType::kXrcIni;
    ia.send_cq = scq;
    ia.cap = {4, 0, 1, 0, 0};
    Qp* ini = *a->create_qp(pa, ia);
    QpInitAttr ta;
    ta.qp_type = QpType::kXrcTgt;
    ta.xrcd = x;
    Qp* tgt = *b->create_qp(nullptr, ta);
    ini_qpn = ini->qp_num();
    tgt_qpn = tgt->qp_num();
    ASSERT_FALSE(connect_pair(*a, *ini, *b, *tgt, ConnectOptions{}));
    Sge rs{reinterpret_cast<uint64_t>(bbuf.data()), 4096, bmr->lkey()};
    RecvWr rw{9, std::span<const Sge>(&rs, 1)};
    ASSERT_FALSE(srq->post_recv(std::span<const RecvWr>(&rw, 1), nullptr));
    auto pcap = capture::PcapWriter::open(path);
    ASSERT_TRUE(pcap);
    PcapTap tap_a(*pcap, PcapTap::Dirs::kTx), tap_b(*pcap, PcapTap::Dirs::kTx);
    a->set_tap(&tap_a);
    b->set_tap(&tap_b);
    fill_pattern(abuf, 0, 2000, 3);
    Sge s{reinterpret_cast<uint64_t>(abuf.data()), 2000, amr->lkey()};
    SendWr wr = make_wr(WrOpcode::kSend, &s, 1, 1);  // SEND First + SEND Last at MTU 1024
    wr.xrc_remote_srqn = srqn;
    ASSERT_FALSE(post_send(ini, wr));
    Sge ws{reinterpret_cast<uint64_t>(abuf.data()), 64, amr->lkey()};
    SendWr w = make_wr(WrOpcode::kRdmaWrite, &ws, 1, 2);  // WRITE Only: XRCETH then RETH
    w.rdma = {reinterpret_cast<uint64_t>(bbuf.data()) + 3000, bmr->rkey()};
    w.xrc_remote_srqn = srqn;
    ASSERT_FALSE(post_send(ini, w));
    auto c = env.wait_wcs(scq, 2, {a.get(), b.get()});
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    EXPECT_EQ(c[1].status, WcStatus::kSuccess);
    ASSERT_EQ(env.wait_wcs(rcq, 1, {a.get(), b.get()}).size(), 1u);
    a->set_tap(nullptr);
    b->set_tap(nullptr);
    ASSERT_FALSE(pcap->close());
  }
  // tshark 4.0 names the XRC opcodes but has no dissector for the XRCETH: it
  // shows the headers after the BTH as "Vendor Specific or Unknown Header
  // Sequence" (infiniband.vendor), its first four bytes as one item and then
  // the whole rest. The XRCETH is those first four bytes (reserved, SRQ number),
  // the RETH of a WRITE the next sixteen; an XRC ACK's first four are its AETH.
  const std::string cmd = kTshark + " -r " + quote(path) +
                          " -T fields -E separator=/t -E occurrence=a -E aggregator='|' -e frame.number"
                          " -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.vendor -e _ws.malformed";
  Output out = run(cmd);
  ASSERT_EQ(out.status, 0) << cmd << "\n" << out.err;
  if (!std::getenv("ROCELAB_KEEP_PCAP")) ::unlink(path.c_str());
  char want_xrceth[16];
  std::snprintf(want_xrceth, sizeof want_xrceth, "00%06x", srqn);
  std::vector<unsigned long> ops;
  for (const std::string& line : split(out.out, '\n')) {
    auto c = split(line, '\t');
    if (c.size() < 4 || c[0].empty()) continue;
    c.resize(5);
    EXPECT_EQ(c[4], "") << "malformed: " << line;
    const unsigned long op = std::stoul(c[1]);
    ops.push_back(op);
    const auto vendor = split(c[3], '|');
    ASSERT_EQ(vendor.size(), 2u) << line;
    const std::string& rest = vendor[1];
    if (op == 0xA0 || op == 0xA2 || op == 0xAA) {  // XRC SEND First, SEND Last, RDMA WRITE Only
      EXPECT_EQ(std::stoul(c[2], nullptr, 0), tgt_qpn);
      EXPECT_EQ(vendor[0], want_xrceth) << "the XRCETH names SRQ " << srqn << ": " << line;
    }
    if (op == 0xAA) {  // the RETH follows the XRCETH: DMA length 64
      ASSERT_GE(rest.size(), 40u);
      EXPECT_EQ(rest.substr(32, 8), "00000040") << rest;
    }
    if (op == 0xB1) {  // XRC Acknowledge: AETH (syndrome 0x1f: ACK, credits invalid), no XRCETH
      EXPECT_EQ(std::stoul(c[2], nullptr, 0), ini_qpn);
      EXPECT_EQ(vendor[0].substr(0, 2), "1f") << line;
      EXPECT_EQ(rest.size(), 16u) << "AETH and ICRC only: " << line;
    }
  }
  // SEND First, SEND Last, WRITE Only, and at least one ACK (ACKs may coalesce).
  ASSERT_GE(ops.size(), 4u);
  EXPECT_EQ(ops[0], 0xA0u);
  EXPECT_EQ(ops[1], 0xA2u);
  EXPECT_NE(std::find(ops.begin(), ops.end(), 0xAAul), ops.end());
  EXPECT_NE(std::find(ops.begin(), ops.end(), 0xB1ul), ops.end());
}

}  // namespace
}  // namespace rocelab::emu::test
