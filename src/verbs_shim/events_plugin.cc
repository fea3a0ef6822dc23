// librocelab_verbs_events.so: the engine's Protobuf event log for the shim.
#include "verbs_shim/events_plugin.h"

#include <cerrno>
#include <new>

#include "emu/records/event_log.h"
#include "wire/write_barrier.h"

extern "C" void* rocelab_events_open(const char* path, const char* device,
                                     rocelab::emu::EventSink** sink, int* err) {
  auto log = rocelab::emu::EventLog::open(path);
  if (!log) {
    *err = log.error().value();
    return nullptr;
  }
  rocelab::emu::EventLog* l = log->release();
  *sink = l->sink_for(device);
  return l;
}

extern "C" void rocelab_events_close(void* log) {
  auto* l = static_cast<rocelab::emu::EventLog*>(log);
  (void)l->flush();
  delete l;
}

extern "C" bool rocelab_events_quiesce(int max_wait_ms, int sig) {
  return rocelab::wire::quiesce_writes(max_wait_ms, sig);
}
