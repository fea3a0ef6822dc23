// `rocelab events FILE`: reads an event log (`rocelab run --events`, `rocelab
// loopback --events`; proto/events.proto, length-delimited) and prints one
// event per line, as text or (--json) one JSON object per line.
// Exit: 0 read to the end, 1 the log ends inside an event or holds garbage
// (what came before is printed), 2 unreadable file.
#include <cstdio>
#include <memory>
#include <string>

#include "emu/records/event_log.h"
#include "tools/commands.h"

namespace rocelab::tools {
namespace {

struct EventsOptions {
  std::string file;
  bool json = false;
};

int print_events(const EventsOptions& o) {
  uint64_t n = 0;
  const std::error_code ec = emu::read_event_log(
      o.file, o.json, [](const emu::EventLine& l) { std::printf("%s\n", l.text.c_str()); }, &n);
  std::fflush(stdout);
  if (ec == std::errc::illegal_byte_sequence) {
    std::fprintf(stderr, "rocelab events: %s: damaged after event %llu (cut inside an event, or not an event log)\n",
                 o.file.c_str(), static_cast<unsigned long long>(n));
    return 1;
  }
  if (ec) {
    std::fprintf(stderr, "rocelab events: %s: %s\n", o.file.c_str(), ec.message().c_str());
    return 2;
  }
  return 0;
}

}  // namespace

void register_events(CLI::App& app) {
  auto o = std::make_shared<EventsOptions>();
  auto* cmd = app.add_subcommand("events", "Print an engine event log (rocelab run/loopback --events FILE)");
  cmd->add_option("file", o->file, "the event log")->required();
  cmd->add_flag("--json", o->json, "one JSON object per event (proto/events.proto field names)");
  cmd->callback([o] { exit_code() = print_events(*o); });
}

}  // namespace rocelab::tools
