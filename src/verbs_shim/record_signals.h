// The shim's records (ROCELAB_PCAP, ROCELAB_EVENTS) against SIGTERM, SIGINT and
// SIGHUP: a handler, chained in front of the program's own, lets a pcap or
// event-log write under way finish before the process dies, so the files end
// on a whole record. The records themselves are flushed at the end of every
// engine batch (records.h), so the process loses at most the batch in hand.
#pragma once

namespace rocelab::verbs_shim {

// Installs the handlers once (later calls do nothing). A signal the program
// ignores stays ignored; one it handles goes on to its handler, untouched (the
// program decides whether to die); only a default, fatal disposition is
// preceded by wire::quiesce_writes and then carried out as before.
void guard_records_against_signals() noexcept;

}  // namespace rocelab::verbs_shim
