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

// A write barrier of another module (a copy of wire/write_barrier linked into
// it, as the event-log module has): the handler quiesces it too, after the
// shim's own. At most one; later calls replace it.
using QuiesceFn = bool (*)(int max_wait_ms, int sig);
void also_quiesce_on_signal(QuiesceFn fn) noexcept;

}  // namespace rocelab::verbs_shim
