// Property tests of RC reliability: what one stream's completions and memory
// must look like. Every check returns what is wrong ("" when all is well), so
// the harness reports it and the self-test can feed it wrong histories.
#pragma once
#include <cstddef>
#include <span>
#include <string>

#include "emu/verbs_attrs.h"
#include "tests/emu/property_workload.h"

namespace rocelab::emu::test {

class StreamChecker {
 public:
  explicit StreamChecker(const StreamPlan& plan) : plan_(plan) {}

  // A completion from the requester's send queue: the next signaled WR in
  // posting order (the unsignaled ones before it complete with it), SUCCESS,
  // the WR's opcode.
  std::string on_send(const Wc& wc);
  // A completion from the responder's receive queue: the next receive WQE in
  // posting order, SUCCESS, byte_len, opcode, immediate, and its range of the
  // responder's memory (`remote`, the whole MR) byte-exact: the message whose
  // receive it is, the rest untouched.
  std::string on_recv(const Wc& wc, std::span<const std::byte> remote);

  // The whole local and remote MR against final_local()/final_remote().
  std::string check_local(std::span<const std::byte> local) const;
  std::string check_remote(std::span<const std::byte> remote) const;

  size_t done() const { return done_; }            // WRs completed
  size_t recv_done() const { return recv_done_; }  // receives completed
  bool finished() const { return done_ == plan_.ops.size() && recv_done_ == plan_.recvs.size(); }

 private:
  std::string what_is_at(bool local, uint64_t off) const;
  std::string op_name(size_t i) const;
  std::string name_message(std::span<const std::byte> bytes) const;

  const StreamPlan& plan_;
  size_t done_ = 0, recv_done_ = 0;
};

}  // namespace rocelab::emu::test
