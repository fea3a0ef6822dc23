// The verbs objects a Device creates: PD, MR, completion channel, CQ, SRQ, AH
// and QP. They are owned by their Device (create_* / destroy_* on Device) and
// every method is thread-safe (it takes the device lock). Errors are POSIX
// error codes in std::generic_category (EINVAL, ENOMEM, EAGAIN, EBUSY ...),
// so the shim hands ec.value() on as errno.
#pragma once
#include <cstdint>
#include <span>
#include <system_error>

#include "emu/records.h"
#include "emu/verbs_attrs.h"

namespace rocelab::emu {

// Every object carries one opaque pointer for its user (the shim keeps its
// ibv_* mirror there).
class Object {
 public:
  void set_user_context(void* p) { user_context_ = p; }
  void* user_context() const { return user_context_; }

 protected:
  Object() = default;
  ~Object() = default;
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

 private:
  void* user_context_ = nullptr;
};

class Pd : public Object {
 public:
  uint32_t handle() const;

 protected:
  Pd() = default;
  ~Pd() = default;
};

class Mr : public Object {
 public:
  uint32_t lkey() const;
  uint32_t rkey() const;
  void* addr() const;      // start of the registered memory in this process
  uint64_t length() const;
  uint64_t iova() const;   // the address remote peers use (== addr unless reg_mr_iova)
  unsigned access() const; // access::
  Pd* pd() const;

 protected:
  Mr() = default;
  ~Mr() = default;
};

// A memory window (IBTA 10.6.7): an R_Key for a part of an MR, bound and
// invalidated by work requests (BIND_MW, LOCAL_INV, SEND_WITH_INV). Type 1 is
// bound by any QP of its PD and never invalidated; type 2 is bound to one QP.
class Mw : public Object {
 public:
  uint32_t rkey() const;  // the current R_Key (changes with each bind)
  MwType type() const;
  Pd* pd() const;

 protected:
  Mw() = default;
  ~Mw() = default;
};

// Its fd becomes readable (one eventfd count per event) when an armed CQ of
// this channel gets a completion. poll()/epoll() work on it.
class CompChannel : public Object {
 public:
  int fd() const;
  // Takes one event: the CQ that fired. Blocks unless the fd is O_NONBLOCK
  // (then EAGAIN when there is none).
  std::error_code get_event(Cq** cq);

 protected:
  CompChannel() = default;
  ~CompChannel() = default;
};

class Cq : public Object {
 public:
  int capacity() const;   // the cqe count actually allocated (>= requested)
  CompChannel* channel() const;
  // Grows or shrinks the CQ to hold cqe completions, keeping every completion
  // it holds, in order (ibv_resize_cq). EINVAL when cqe is out of range or
  // smaller than the number of completions held now.
  std::error_code resize(int cqe);
  // Drives progress (receives and processes packets, runs due timers), then
  // fills up to out.size() completions, oldest first. Returns how many.
  // Overflow raises CQ_ERR (async event) and moves the CQ's QPs to ERR; the
  // CQ keeps the completions it holds.
  int poll(std::span<Wc> out);
  // Arms the CQ: the next completion (or next solicited / error completion when
  // solicited_only) signals the channel once.
  std::error_code req_notify(bool solicited_only);
  void ack_events(unsigned n);
  unsigned events_delivered() const;  // events handed out by CompChannel::get_event
  unsigned events_acked() const;

 protected:
  Cq() = default;
  ~Cq() = default;
};

// An XRC domain (IBTA XRC annex; ibv_open_xrcd): XRC SRQs and XRC target QPs
// belong to one. Contexts of a device that open it through the same file
// share it.
class Xrcd : public Object {
 protected:
  Xrcd() = default;
  ~Xrcd() = default;
};

class Srq : public Object {
 public:
  // Its number (ibv_get_srq_num): what an XRC initiator names in the XRCETH.
  uint32_t srq_num() const;
  SrqType type() const;
  Xrcd* xrcd() const;  // XRC: its domain
  Cq* cq() const;      // XRC: where its receives complete
  std::error_code post_recv(std::span<const RecvWr> wrs, size_t* n_posted);
  // mask: srq_attr:: bits. kLimit arms the SRQ limit event (fires once when the
  // number of posted WRs drops below srq_limit).
  std::error_code modify(const SrqAttr& attr, uint32_t mask);
  SrqAttr query() const;

 protected:
  Srq() = default;
  ~Srq() = default;
};

class Ah : public Object {
 public:
  const AhAttr& attr() const;
  Pd* pd() const;

 protected:
  Ah() = default;
  ~Ah() = default;
};

class Qp : public Object {
 public:
  uint32_t qp_num() const;
  QpType type() const;
  QpState state() const;
  const QpCap& cap() const;  // actual capacities (>= requested)
  Pd* pd() const;
  Cq* send_cq() const;
  Cq* recv_cq() const;
  Srq* srq() const;
  Xrcd* xrcd() const;  // XRC_TGT: its domain

  // IBTA 10.3.1 / qp_state_table.md: checks the transition and every attribute,
  // then applies them all; EINVAL and nothing changed on any violation.
  std::error_code modify(const QpAttr& attr, uint32_t mask);
  // Every attribute (including those never set, at their defaults) and the init attributes.
  std::error_code query(QpAttr* attr, QpInitAttr* init) const;

  // Posts work requests in order; stops at the first bad one (*n_posted tells
  // how many were accepted; the error is the one ibv_post_send returns:
  // EINVAL bad WR, ENOMEM queue full). Builds and sends packets before returning.
  std::error_code post_send(std::span<const SendWr> wrs, size_t* n_posted);
  std::error_code post_recv(std::span<const RecvWr> wrs, size_t* n_posted);

  Counters counters() const;
  // Why the last refused modify was refused, in a line ("modify_qp INIT->RTR on
  // RC: missing PATH_MTU, DEST_QPN"); empty when none was. The error code the
  // caller got is unchanged: this only explains it (rocelab run --explain).
  std::string last_refusal() const;

 protected:
  Qp() = default;
  ~Qp() = default;
};

}  // namespace rocelab::emu
