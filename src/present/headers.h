// A RoCEv2 packet's headers (BTH and its extension headers) in words, in the
// two shapes rocelab shows them: one line (`rocelab decode`) and a line per
// header with every field (the ladders' detail view); and as JSON fields.
#pragma once
#include <string>

#include "present/json.h"
#include "wire/packet.h"

namespace rocelab::present {

// "RC SEND Only QP=0x000011 PSN=5 A RETH[va=0x... rkey=0x... len=64] AETH[ACK credits=31 MSN=3]":
// the opcode, the BTH's fields that matter (flags only when set, the P_Key when
// not the default) and each extension header in brackets.
std::string header_line(const wire::RoceHeaders& h);

// Every field of every header, a line each ("BTH    opcode 0x04 (RC SEND Only) ..."),
// then the payload length and the ICRC carried.
std::string header_lines(const wire::RocePacket& p);

// The headers' fields added to j (`rocelab decode --json`): "opcode", "opname",
// "transport", the BTH's fields, then an object per extension header ("reth":
// {"va", "rkey", "dma_len"}, "aeth": {"syndrome", "kind", ..., "msn"}, ...).
void add_headers_json(Json& j, const wire::RoceHeaders& h);

}  // namespace rocelab::present
