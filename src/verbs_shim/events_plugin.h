// ROCELAB_EVENTS lives in a separate module, librocelab_verbs_events.so, that
// the shim dlopen()s only when an event log is asked for: the log is Protobuf,
// and linking libprotobuf into the shim would put it (and our events.proto
// registration, which clashes with any other copy of it in the process) into
// every program the shim is preloaded into.
//
// The module carries its own copy of wire/write_barrier (it links
// rocelab_emu_records statically), so the shim's signal guard
// (record_signals.h) has to quiesce that copy too: rocelab_events_quiesce.
#pragma once
#include "emu/records.h"

extern "C" {
// Opens (truncates) `path` and returns the log, with the sink for `device` in
// *sink; nullptr with an errno value in *err on failure.
void* rocelab_events_open(const char* path, const char* device, rocelab::emu::EventSink** sink,
                          int* err);
// Flushes and closes a log from rocelab_events_open.
void rocelab_events_close(void* log);
// wire::quiesce_writes on the module's own write barrier (the event log's
// writes): for the shim's signal handler; async-signal-safe.
bool rocelab_events_quiesce(int max_wait_ms, int sig);
}
