// `rocelab decode`: how a MAD carried to QP 1 is printed. CM MADs by name
// (ConnectRequest, ConnectReply, ...) with their key fields and, on a REQ or
// SIDR_REQ of rdma_cm, the addresses of its private-data header; other MADs by
// their common header; a CM MAD that does not parse by its error.
#pragma once
#include <cstddef>
#include <span>
#include <string>

namespace rocelab::decode {

// " CM ConnectRequest(REQ) TID=0x... comm=0x... service=0x...(TCP port 7174) ..."
// (with a leading space, to follow the packet's own fields).
std::string mad_text(std::span<const std::byte> mad);
// A JSON object for the "mad" key of a packet line.
std::string mad_json(std::span<const std::byte> mad);

}  // namespace rocelab::decode
