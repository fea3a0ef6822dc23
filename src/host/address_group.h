// One address's UDP port 4791, shared by every rocelab process that uses
// the address (docs/host.md). Each process binds its own socket with
// SO_REUSEPORT; together they form the kernel's reuseport group, steered by
// a classic BPF program (reuseport_program.h) so that each datagram is queued
// on the socket of the process that owns its destination QP.
//
// What the members share lives in <net_dir>/addr-<address>/ (runtime_dir.h):
//   lock    flock()ed around every change of membership
//   table   mmap()ed: a random cookie, the probe generation, and 255 slots
//           (pid and start time, state, the socket's index in the group,
//           the CM Service IDs it listens on)
//   n<slot> each active member's unix datagram socket: "membership changed"
// A slot is a process's place: its QPNs and CM communication IDs carry the
// slot as their top byte. Which index the kernel gave a member's socket is
// found by probes (wire/host_probe.h); a member's watcher thread sleeps on the
// other members' pidfds and its notify socket, and whoever sees a member die
// or leave frees its slot, probes again and attaches a new program. Slots of
// dead processes (a crash, kill -9) are found and freed by the next process
// that takes the lock: a table is never trusted beyond what /proc confirms.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "wire/error.h"
#include "wire/ip_udp.h"

namespace rocelab::host {

inline constexpr int kSlots = 255;  // 0..254: the top byte 0xFF is DestQP 0xFFFFFF (multicast)

struct JoinOptions {
  uint32_t scope_id = 0;  // the interface of an IPv6 link-local address
  // Only where no live process holds the address (an address picked for a
  // process of its own, as rocelab run's 127.0.0.x): address_in_use otherwise.
  bool alone = false;
  // How long to wait for the group's lock (held only for table updates): a
  // member that holds it and is stopped (SIGSTOP, a debugger) is named in the
  // error after that (timed_out).
  int lock_timeout_ms = 10000;
};

class AddressGroup {
 public:
  // Binds UDP 4791 on addr with SO_REUSEPORT and takes a slot (state
  // "joining": packets are not steered to it until activate()). Errors, with
  // `error` set to a sentence: the runtime directory is unusable; the group's
  // table is of another layout version (both named); the port is held by a
  // socket outside the group (its process named when it can be found);
  // every slot is taken.
  static wire::Result<std::unique_ptr<AddressGroup>> join(const wire::IpAddr& addr,
                                                          const JoinOptions& opt,
                                                          std::string* error);
  ~AddressGroup();  // leaves: the slot is freed and the others re-steer
  AddressGroup(const AddressGroup&) = delete;
  AddressGroup& operator=(const AddressGroup&) = delete;

  const wire::IpAddr& address() const;
  int slot() const;
  // The bound socket, once: the caller (the UDP transport) owns it from then
  // on. The group keeps a duplicate to attach programs with.
  int take_socket();

  // A probe reached this member's socket (UdpTransport::set_control_handler
  // with wire::kHostProbeMagic): its index is recorded. Any thread.
  void on_probe(std::span<const std::byte> datagram);

  // The member receives now (its transport is polled): it probes every
  // member's index, attaches the program, and starts watching the others.
  std::error_code activate(std::string* error);

  // The CM Service IDs this member listens on (REQs for them are steered to
  // it); re-steers the group.
  void set_services(std::vector<uint64_t> service_ids);
  // Whether another live member listens on service_id: on one host an rdma_cm
  // port is listened on once, whichever process asks (EADDRINUSE).
  bool listened_by_another(uint64_t service_id);

  // This member is about to stop receiving (its transport is going away,
  // then the group): from now on no packets are steered to it and the others'
  // probes do not wait for its answer. The destructor does it too; call it
  // first when the socket stops being read before the group is destroyed.
  void begin_leave();

  // How many members are active, for tests and `rocelab stat`.
  int active_members() const;

  struct Impl;

 private:
  explicit AddressGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rocelab::host
