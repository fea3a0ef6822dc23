// The comparison behind `rocelab replay` (replay.h): what the capture's
// responder and the live responder answered, per PSN relative to the start of
// the connection, judged once the replay has moved a window past that PSN.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "replay/replay.h"
#include "wire/packet.h"

namespace rocelab::replay {

// What one responder answered at one PSN.
struct Answer {
  bool any = false;
  uint8_t opcode = 0;        // of the first response at this PSN
  uint8_t opcodes = 0;       // every response opcode seen here: bit (opcode - READ response First)
  uint64_t frame = 0;        // capture frame of the first (capture side only)
  uint32_t acks = 0;         // responses whose AETH is an ACK (duplicates included)
  uint8_t credits = 0;       // of the first plain ACK
  bool plain_ack = false;
  uint32_t msn = 0;          // of the first ACK-type AETH
  bool has_msn = false;
  uint8_t nak = 0xFF;        // the first NAK's code (wire::NakCode), 0xFF none
  uint32_t rnr = 0;          // RNR NAKs
  uint8_t rnr_timer = 0;
  bool read = false;         // a READ response payload at this PSN (the first)
  uint32_t read_len = 0;
  uint64_t read_hash = 0;
  bool atomic = false;       // an ATOMIC Acknowledge (the first)
  uint64_t orig = 0;
  // The READ data or original value (of the first) against what the
  // capture's own WRITEs (and atomics) left in that memory, where they
  // determine it: known_bytes of it are determined, and match tells whether
  // this side returned exactly those bytes. A correct responder must; where
  // the capture's own responder did not, its application changed the memory
  // where the capture cannot see, and nothing is judged.
  uint32_t known_bytes = 0;
  bool match = false;
};

// What one side's READ data or atomic value says of the determined memory.
struct Determined {
  uint32_t known_bytes = 0;
  bool match = false;
};

struct Slot {
  Answer cap, live;
  uint64_t req_frame = 0;    // the capture frame of the request at this PSN (the last sent)
};

class Comparer {
 public:
  Comparer(const ReplayOptions& o, ReplayResult& r) : o_(o), r_(r) {}

  // A request sent at rel; a READ or atomic asks for an answer at its last PSN.
  void on_request(int64_t rel, uint64_t frame, bool ack_req);
  void on_answer_asked(int64_t last_rel);
  // A response of either side, at rel (det: its READ data or atomic value against the determined memory).
  void on_response(bool capture, int64_t rel, const wire::RocePacket& p, uint64_t frame, Determined det = {});
  // Judges every PSN before `before` (all with INT64_MAX).
  void finalize(int64_t before);

 private:
  void record(Answer& a, int64_t rel, const wire::RocePacket& p, uint64_t frame, Determined det, int64_t* acked);
  void judge(int64_t rel, const Slot& s);
  void diff(DiffClass c, std::string_view kind, int64_t rel, const Slot& s, std::string text);
  std::string describe(const Answer& a, bool covered) const;

  const ReplayOptions& o_;
  ReplayResult& r_;
  std::map<int64_t, Slot> slots_;
  int64_t cap_acked_ = -1, live_acked_ = -1;  // the highest PSN each side has acknowledged
  int64_t max_ack_req_ = -1;                   // the highest PSN sent with AckReq
  // MSNs are compared from the first PSN both answered with one: a capture
  // that begins after N messages has the capture's MSNs N ahead.
  int64_t live_refused_ = -1;  // the first PSN the live responder refused (its QP is in ERR after it)
  bool msn_base_ = false;
  uint32_t msn_delta_ = 0;
  std::map<std::string_view, uint64_t> listed_;
};

}  // namespace rocelab::replay
