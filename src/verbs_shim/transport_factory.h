// What carries an emulated device's packets, as the configuration asks: the
// UDP transport on the device's address (with the fault injector in front of
// it when faults are configured), plus the pcap writer and event log.
#pragma once
#include <memory>

#include "emu/records.h"
#include "emu/transport/transport.h"
#include "verbs_shim/config.h"
#include "wire/error.h"

namespace rocelab::verbs_shim {

wire::Result<std::unique_ptr<emu::Transport>> make_transport(const DeviceConfig& dev,
                                                             const ShimConfig& cfg);

struct DeviceTaps {
  std::unique_ptr<emu::PacketTap> pcap;    // null unless ROCELAB_PCAP is set
  std::unique_ptr<emu::EventSink> events;  // null unless ROCELAB_EVENTS is set
};
wire::Result<DeviceTaps> make_taps(const DeviceConfig& dev, const ShimConfig& cfg);

}  // namespace rocelab::verbs_shim
