// What carries an emulated device's packets, as the configuration asks: the
// UDP transport on the device's address (with the fault injector in front of
// it when faults are configured), plus the pcap writer and event log.
#pragma once
#include <memory>

#include "capture/pcap_writer.h"
#include "emu/records.h"
#include "emu/records/pcap_tap.h"
#include "emu/transport/transport.h"
#include "host/address_group.h"
#include "verbs_shim/config.h"
#include "wire/error.h"

namespace rocelab::verbs_shim {

// The transport on the device's address, a member of the address's group of
// processes (host::AddressGroup, returned in *group, which must outlive the
// transport): the configured address, shared with every other rocelab
// process that uses it, or the first 127.0.0.x no live process uses.
wire::Result<std::unique_ptr<emu::Transport>> make_transport(
    const DeviceConfig& dev, const ShimConfig& cfg, std::unique_ptr<host::AddressGroup>* group);

// Closes an event log through the module that opened it (events_plugin.h).
struct EventLogCloser {
  void (*close)(void*) = nullptr;
  void operator()(void* log) const { close(log); }
};

// ROCELAB_PCAP and ROCELAB_EVENTS for one device. Members are destroyed
// bottom-up: the tap before the file it writes to.
struct DeviceTaps {
  std::unique_ptr<capture::PcapWriter> pcap_file;
  std::unique_ptr<emu::PcapTap> pcap;  // null unless ROCELAB_PCAP is set
  std::unique_ptr<void, EventLogCloser> log;  // events_plugin.h; null unless ROCELAB_EVENTS
  emu::EventSink* events = nullptr;           // owned by log
};
void rocelab_events_plugin_anchor();

// clock_offset turns the transport's clock into wall-clock time (pcap timestamps).
wire::Result<std::unique_ptr<DeviceTaps>> make_taps(const DeviceConfig& dev, const ShimConfig& cfg,
                                                    emu::Nanos clock_offset);

}  // namespace rocelab::verbs_shim
