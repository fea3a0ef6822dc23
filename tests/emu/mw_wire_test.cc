// SEND with Invalidate on the wire: the engine's capture of a SEND_WITH_INV
// that invalidates a type 2 memory window, read by tshark (the judge): one
// RC SEND Only with Invalidate (opcode 0x17) whose IETH carries the window's
// R_Key, an ICRC tshark accepts, nothing malformed. Label `tools` (tshark).
#include <unistd.h>

#include <gtest/gtest.h>

#include "emu/records/pcap_tap.h"
#include "tests/emu/pair.h"
#include "tests/wire/tshark_fields.h"

namespace rocelab::emu::test {
namespace {

using namespace wire::testutil;

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kMwBind;

TEST(MwWire, TsharkReadsTheIethOfASendWithInvalidate) {
  const std::string path = ::testing::TempDir() + "/mw_send_inv" + std::to_string(::getpid()) + ".pcap";
  uint32_t rkey = 0;
  {
    Env env(Net::kSim);
    Node a = env.make_node(1, QpType::kRC, 8192, kAll);
    Node b = env.make_node(2, QpType::kRC, 8192, kAll);
    auto pcap = capture::PcapWriter::open(path);
    ASSERT_TRUE(pcap);
    PcapTap tap_a(*pcap, PcapTap::Dirs::kTx), tap_b(*pcap, PcapTap::Dirs::kTx);
    ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
    Mw* mw = *b.dev->alloc_mw(b.pd, MwType::kType2);
    SendWr bind = make_wr(WrOpcode::kBindMw, nullptr, 0, 1);
    bind.bind_mw = {mw, (mw->rkey() & ~0xFFu) | 0x5A, b.mr, b.addr(), 4096, access::kRemoteWrite};
    ASSERT_FALSE(post_send(b.qp, bind));
    ASSERT_EQ(env.wait_wcs(b.scq, 1, {a.dev.get(), b.dev.get()}).at(0).status, WcStatus::kSuccess);
    rkey = mw->rkey();
    ASSERT_FALSE(post_recv(b.qp, b.addr() + 4096, 256, b.mr->lkey(), 2));
    a.dev->set_tap(&tap_a);
    b.dev->set_tap(&tap_b);
    fill_pattern(a.buf, 0, 100, 3);
    Sge s{a.addr(), 100, a.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kSendWithInv, &s, 1, 3);
    wr.invalidate_rkey = rkey;
    ASSERT_FALSE(post_send(a.qp, wr));
    ASSERT_EQ(env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()}).at(0).status, WcStatus::kSuccess);
    auto r = env.wait_wcs(b.rcq, 1, {a.dev.get(), b.dev.get()});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].imm_data, rkey);
    a.dev->set_tap(nullptr);
    b.dev->set_tap(nullptr);
    ASSERT_FALSE(pcap->close());
  }
  auto rows = tshark_rows(path);
  ::unlink(path.c_str());
  int inv = 0, acks = 0;
  for (const auto& c : rows) {
    if (c[kFrame].empty()) continue;
    EXPECT_EQ(c[kMalformed], "");
    const unsigned long op = c[kOpcode].empty() ? 0xFFFF : std::stoul(c[kOpcode], nullptr, 0);
    if (op == 0x17) {  // RC SEND Only with Invalidate
      ++inv;
      EXPECT_EQ(std::stoul(c[kIeth], nullptr, 16), rkey) << c[kIeth];
      EXPECT_EQ(c[kDataLen], "100");
    } else if (op == 0x11) {  // RC Acknowledge
      ++acks;
      EXPECT_EQ(c[kIeth], "");
    }
  }
  EXPECT_EQ(inv, 1);
  EXPECT_EQ(acks, 1);
}

}  // namespace
}  // namespace rocelab::emu::test
