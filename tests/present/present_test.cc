// src/present: the words for header fields and AETHs are the ones the commands'
// outputs and docs show, and the JSON writer keeps key order, escapes what
// JSON and an HTML script need, and never fails on bytes that are not UTF-8.
#include <gtest/gtest.h>

#include "present/fields.h"
#include "present/headers.h"
#include "present/json.h"

namespace rocelab::present {
namespace {

TEST(PresentFields, NumbersAsTheCommandsPrintThem) {
  EXPECT_EQ(hex(0xab), "0xab");
  EXPECT_EQ(hex(0xab, 4), "0x00ab");
  EXPECT_EQ(qpn_text(0x11), "0x000011");
  EXPECT_EQ(rkey_text(0x1234), "0x00001234");
}

TEST(PresentFields, AethInFullAndBrief) {
  const wire::Aeth ack = wire::Aeth::ack(7, 31);
  EXPECT_EQ(aeth_text(ack), "ACK credits=31");
  EXPECT_EQ(aeth_brief(ack), "ACK msn 7");

  const wire::Aeth rnr{static_cast<uint8_t>(0x20 | 14), 3};  // RNR NAK, timer 14: 1.28 ms
  EXPECT_EQ(aeth_kind(rnr), "RNR NAK");
  EXPECT_EQ(aeth_text(rnr), "RNR NAK timer=14 (1280 us)");
  EXPECT_EQ(rnr_text(14), "RNR NAK timer=14 (1280 us)");
  EXPECT_EQ(aeth_brief(rnr), "RNR NAK 1.28 ms");

  const wire::Aeth nak{0x60, 9};  // NAK 0
  EXPECT_EQ(aeth_text(nak), "NAK 0 (PSN sequence error)");
  EXPECT_EQ(aeth_brief(nak), "NAK PSN sequence error");
  EXPECT_EQ(nak_name(3), "remote operational error");
  EXPECT_EQ(nak_name(17), "reserved");

  const wire::Aeth reserved{0x40, 0};
  EXPECT_EQ(aeth_kind(reserved), "reserved");
  EXPECT_EQ(aeth_text(reserved), "reserved syndrome=0x40");
}

TEST(PresentHeaders, OneLineAndJsonAgree) {
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kRcWriteOnly;
  h.bth.dest_qpn = wire::Qpn(0x12);
  h.bth.psn = wire::Psn(5);
  h.bth.ack_req = true;
  h.reth = {0x1000, 0xabc, 64};
  EXPECT_EQ(header_line(h), "RC RDMA WRITE Only QP=0x000012 PSN=5 A RETH[va=0x0000000000001000 rkey=0x00000abc len=64]");
  Json j = Json::object();
  add_headers_json(j, h);
  EXPECT_EQ(j["opname"], "RC RDMA WRITE Only");
  EXPECT_EQ(j["dest_qp"], 0x12);
  EXPECT_EQ(j["ack_req"], true);
  EXPECT_EQ(json_line(j["reth"]), R"({"va":4096,"rkey":2748,"dma_len":64})");
  EXPECT_FALSE(j.contains("aeth"));
}

TEST(PresentJson, KeepsKeyOrderOnOneLine) {
  const Json j = {{"type", "x"}, {"b", 1}, {"a", true}, {"list", {1, 2}}};
  EXPECT_EQ(json_line(j), R"({"type":"x","b":1,"a":true,"list":[1,2]})");
}

TEST(PresentJson, EscapesAndReplacesBytesThatAreNotUtf8) {
  const Json j = {{"file", std::string("we\"ird\\name\t\xff.pcap\x01")}};
  EXPECT_EQ(json_line(j), "{\"file\":\"we\\\"ird\\\\name\\t\xef\xbf\xbd.pcap\\u0001\"}");
  const Json ok = {{"text", "alice \xe2\x86\x92 bob"}};  // valid UTF-8 stays as it is
  EXPECT_EQ(json_line(ok), "{\"text\":\"alice \xe2\x86\x92 bob\"}");
}

TEST(PresentJson, ScriptDataCannotCloseTheScript) {
  const Json j = {{"title", "</script><!-- x"}};
  const std::string s = json_for_script(j);
  EXPECT_EQ(s.find('<'), std::string::npos) << s;
  EXPECT_EQ(Json::parse(s)["title"], "</script><!-- x");
}

}  // namespace
}  // namespace rocelab::present
