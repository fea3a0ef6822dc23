// A MAD carried to QP 1, in words and as JSON (`rocelab decode`). CM MADs by name
// (ConnectRequest, ConnectReply, ...) with their key fields and, on a REQ or
// SIDR_REQ of rdma_cm, the addresses of its private-data header; other MADs by
// their common header; a CM MAD that does not parse by its error.
#pragma once
#include <cstddef>
#include <span>
#include <string>

#include "present/json.h"

namespace rocelab::present {

// " CM ConnectRequest(REQ) TID=0x... comm=0x... service=0x...(TCP port 7174) ..."
// (with a leading space, to follow the packet's own fields).
std::string mad_text(std::span<const std::byte> mad);
// The object for the "mad" key of a packet's JSON.
Json mad_json(std::span<const std::byte> mad);

}  // namespace rocelab::present
