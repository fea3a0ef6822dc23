// `rocelab replay CAPTURE`: re-enact the requester side of one captured RC or
// UC connection against a live emulated responder, and compare what comes
// back with what the capture holds (docs/replay.md, "Replay").
//
// The responder is a src/emu Device created here, on a simulated fabric
// (virtual time, deterministic). Its QP, its MRs (one per R_Key seen, spanning
// the RETHs and atomic headers of the requests the capture's responder did not
// refuse; sparse: only written pages cost memory, live_memory.h) and its
// receive queue (for SENDs and WRITEs with immediate)
// are set up from a first look at the capture; then the captured requests are
// sent to it in capture order, remapped (destination QPN, PSN relative to the
// first message start, R_Keys; virtual addresses stay, each MR is registered
// at the I/O virtual address the capture's RETHs use), re-encoded with
// src/wire, ICRC recomputed. Each response is compared, per PSN relative to
// the start, with the capture's; differences are classified:
//   behaviour  the responders disagree on an outcome: a NAK against an ACK, a
//              response one of them never sent although the request asked for
//              one, other READ data or atomic original value (where the
//              capture determines them), another opcode or MSN;
//   policy     both are allowed: ACK coalescing, credit counts, RNR NAKs
//              (receive buffers);
//   network    explained by what the original network did: a PSN sequence
//              error NAK (the original responder missed a request the
//              replay delivers), duplicate ACKs for retransmitted requests,
//              a response the capture lacks (lost, or the capture ends).
// Two passes over the file, each streamed: which connections there are
// (src/trace's Analyzer) and what a responder needs (plan.h), then the
// replay. State is per PSN inside a sliding window, not per packet.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocelab::replay {

using Nanos = std::chrono::nanoseconds;

enum class DiffClass : uint8_t { kBehaviour, kPolicy, kNetwork };
std::string_view to_string(DiffClass c);

struct Difference {
  DiffClass cls = DiffClass::kBehaviour;
  std::string_view kind;   // "nak", "missing_response", "read_data", "ack_coalescing", ... (docs/replay.md)
  int64_t psn = 0;         // relative to the first message start of the connection
  uint64_t frame = 0;      // the capture's response at that PSN (else its request); 0: none
  std::string capture;     // what the capture's responder answered, in words
  std::string live;        // what the live responder answered
  std::string text;        // why this is a difference of that class
};

struct ReplayOptions {
  std::string capture;
  std::optional<uint32_t> qp;       // the connection: a QPN of its requester (or of its responder)
  std::string from;                 // and its requester's address (when two hosts use the same QPN)
  double speed = 1.0;               // original gaps divided by this (virtual time)
  bool as_fast_as_possible = false; // each request as soon as the previous one is answered
  std::string pcap;                 // record the live exchange here (as the responder sees it)
  uint32_t mtu = 0;                 // 0: learned from the capture
  uint64_t max_memory = 1ull << 30; // the pages the replay writes (live MRs and shadows), at most
  uint64_t max_span = 1ull << 40;   // the address ranges of the live MRs together, at most
  size_t max_listed = 50;           // differences listed per kind (0: all); the rest are counted
  // Every few thousand frames of the replay pass: frames done, frames in the capture.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Each difference listed, as it is found.
  std::function<void(const Difference&)> on_difference;
};

// A connection of the capture, one the caller may choose: by the QPN of its
// requester (or responder), and by the requester's address as well when that
// QPN names more than one.
struct ConnectionChoice {
  uint32_t qpn = 0;
  std::string from;  // empty when the QPN alone picks it
  std::string text;  // "10.0.0.1 qp 0x000011 -> 10.0.0.2 qp 0x000012  RC, 12 requests"
};

struct ReplayResult {
  int status = 0;             // 0: no behavioural difference, 1: some, 2: bad file or arguments
  std::string error;          // status 2: why (about the capture and these options, in their own words)
  std::string_view limit;     // status 2 because the capture passes a limit: "max_memory" or "max_span"
  std::vector<ConnectionChoice> choices;  // the connections to choose from (when ambiguous)
  std::string connection;     // "10.0.0.1 qp 0x000011 -> 10.0.0.2 qp 0x000012"
  std::string transport;      // "RC", "UC"
  std::optional<ConnectionChoice> other_direction;  // the connection's other PSN space, if it has requests
  std::string damaged;        // the file ends in a damaged record (replayed up to there)
  uint64_t frames = 0, packets = 0;  // frames in the file, RoCEv2 packets among them
  uint64_t requests = 0, requests_skipped = 0;  // sent to the live responder; not (before the first message start)
  uint64_t captured_responses = 0, live_responses = 0;
  uint64_t reads_compared = 0, reads_undetermined = 0;    // READ response payloads
  uint64_t read_bytes_compared = 0;                        // the determined bytes among them
  uint64_t atomics_compared = 0, atomics_undetermined = 0;  // atomic original values
  uint64_t behaviour = 0, policy = 0, network = 0, not_listed = 0;
  uint32_t mtu = 0, live_qpn = 0, start_psn = 0;
  uint64_t mrs = 0, mr_bytes = 0, receives = 0;  // mr_bytes: the live MRs' spans together
  uint64_t memory_written = 0;  // bytes of pages the replay wrote (live MRs and shadows)
  Nanos virtual_time{0};      // the live exchange's duration on the fabric's clock
  double wall_seconds = 0;    // the replay pass
};

ReplayResult replay_capture(const ReplayOptions& o);

// --to-scenario: writes the connection's messages (each once: no
// retransmissions) to path as a scenario for `rocelab sim` (proto/
// scenario.proto): a requester and a responder node, an MR per R_Key sized as
// the replay sizes it, a post_recv before each SEND and WRITE with Immediate,
// a post_send per message (opcode, length, remote MR and offset, immediate,
// atomic operands), their completions polled every 32. The first 100,000
// messages; r.requests counts those written, r.requests_skipped the rest.
ReplayResult to_scenario(const ReplayOptions& o, const std::string& path);

}  // namespace rocelab::replay
