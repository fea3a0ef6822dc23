// One side of a connection on a testbed device (testbed.h): a PD, a send and a
// receive CQ (on a completion channel when asked), a registered buffer and one
// QP — what `rocelab loopback` and the engine tests set up on each device
// before they connect two of them (emu/connect.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "emu/device.h"

namespace rocelab::testbed {

struct EndpointSpec {
  emu::QpType type = emu::QpType::kRC;
  size_t len = 4096;                       // the buffer, zeroed
  unsigned access = 0;                     // its MR's (emu::access)
  int cqe = 256;                           // each CQ
  emu::QpCap cap = {64, 64, 4, 4, 64};
  bool channel = false;                    // the CQs report to a completion channel
  std::optional<uint64_t> iova;            // the MR's I/O virtual address; default: the buffer's address
  bool with_qp = true;                     // false: no QP (rdma_cm's sides make one per connection)
};

struct Endpoint {
  std::unique_ptr<emu::Device> dev;
  emu::Pd* pd = nullptr;
  emu::CompChannel* ch = nullptr;
  emu::Cq* scq = nullptr;
  emu::Cq* rcq = nullptr;
  emu::Qp* qp = nullptr;
  std::vector<std::byte> buf;
  emu::Mr* mr = nullptr;
  uint64_t iova = 0;                       // where the peer addresses buf
  uint64_t addr() const { return iova; }

  // Creates spec's objects on dev (set by the caller), in the order above.
  // Empty on success; else the verb that failed and why (the objects made
  // before it stay, and go with the device).
  std::string open(const EndpointSpec& spec);
};

}  // namespace rocelab::testbed
