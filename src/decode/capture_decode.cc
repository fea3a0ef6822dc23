#include "decode/capture_decode.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string>

#include "capture/frames.h"
#include "decode/decode_format.h"
#include "present/json.h"
#include "wire/frame.h"
#include "wire/ib_native.h"

namespace rocelab::decode {
namespace {

struct FileTally {
  uint64_t frames = 0, roce = 0, native_ib = 0, bad_icrc = 0, malformed = 0, non_roce = 0;
};

// A frame of an ERF capture: Ethernet records go through decode_frame, InfiniBand
// records through decode_ib; anything else is kNotRoce (skipped).
struct ErfResult {
  std::error_code error;                 // kNotRoce: skipped
  std::optional<wire::DecodedFrame> eth;
  std::optional<wire::IbFrame> ib;
};
ErfResult decode_erf(std::span<const std::byte> frame) {
  ErfResult r;
  auto rec = wire::parse_erf(frame);
  if (!rec) {
    r.error = wire::WireErrc::kNotRoce;  // not even an ERF header: not identifiably ours
    return r;
  }
  if (rec->type == wire::kErfTypeInfiniband) {
    auto ib = wire::decode_ib(rec->payload);
    if (ib) {
      r.ib = *ib;
    } else {
      r.error = ib.error();
    }
  } else if (rec->type == wire::kErfTypeEthernet && rec->payload.size() >= wire::kErfEthPadLen) {
    auto d = wire::decode_frame(static_cast<int>(wire::LinkType::kEthernet),
                                rec->payload.subspan(wire::kErfEthPadLen));
    if (d) {
      r.eth = *d;
    } else {
      r.error = d.error();
    }
  } else {
    r.error = wire::WireErrc::kNotRoce;
  }
  return r;
}

// What can be said about a frame that shows UDP port 4791 but does not decode.
Malformed describe_malformed(int link_type, const capture::Frame& f, std::error_code ec) {
  Malformed m;
  m.error = ec;
  m.caplen = f.data.size();
  m.orig_len = f.orig_len;
  if (auto ip = wire::ip_from_link(link_type, f.data)) {
    if (auto ipu = wire::parse_ip_udp(*ip)) {
      m.ip = ipu->info;
      if (!ipu->udp_payload.empty()) m.opcode = static_cast<uint8_t>(ipu->udp_payload[0]);
    }
  }
  return m;
}

}  // namespace

int decode_capture(const DecodeOptions& o, const std::string& path, std::string_view display_name,
                   Summary& summary, const DecodeSinks& sinks) {
  const auto out_line = [&](const std::string& s) { sinks.out(s); };
  const std::string name(display_name);
  std::string why;
  auto reader = capture::FrameReader::open(path, &why);
  if (!reader) {
    sinks.err("rocelab decode: " + name + ": cannot read as a capture: " + why);
    return kExitUnreadable;
  }
  const int link = reader->link_type();
  FileTally t;
  std::chrono::nanoseconds first{0};
  int status = kExitOk;
  while (const capture::Frame* next = reader->next()) {
    const capture::Frame& f = *next;
    if (f.number == 1) first = f.ts;
    t.frames = f.number;
    const FrameRef ref{display_name, f.number, f.ts, f.ts - first};
    std::optional<wire::DecodedFrame> eth;
    std::optional<wire::IbFrame> ib;
    std::error_code ec;
    if (link == wire::kLinkTypeErf) {
      ErfResult r = decode_erf(f.data);
      eth = std::move(r.eth);
      ib = std::move(r.ib);
      ec = r.error;
    } else if (auto d = wire::decode_frame(link, f.data)) {
      eth = *d;
    } else {
      ec = d.error();
    }
    if (eth || ib) {
      const Endpoints e = eth ? endpoints(*eth) : endpoints(*ib);
      const wire::RocePacket& p = eth ? eth->roce : ib->roce;
      const uint32_t computed = eth ? eth->icrc_computed : ib->icrc_computed;
      ++(eth ? t.roce : t.native_ib);
      if (p.icrc != computed) {
        ++t.bad_icrc;
        status = std::max(status, kExitBadPackets);
      }
      if (o.summary) summary.add(e, p, p.icrc == computed, f.ts);
      out_line(o.json ? packet_json(ref, e, p, computed) : packet_text(ref, e, p, computed));
      continue;
    }
    if (ec == wire::WireErrc::kNotRoce || ec == wire::WireErrc::kUnsupportedLinkType) {
      ++t.non_roce;
      continue;
    }
    ++t.malformed;
    status = std::max(status, kExitBadPackets);
    const Malformed m = describe_malformed(link, f, ec);
    out_line(o.json ? malformed_json(ref, m) : malformed_text(ref, m));
  }
  if (!reader->damaged().empty()) {
    sinks.err("rocelab decode: " + name + ": damaged capture after frame " + std::to_string(t.frames) + ": " +
              reader->damaged());
    status = kExitUnreadable;
  }
  const bool known_link = wire::link_type_supported(link) || link == wire::kLinkTypeErf;
  if (o.json) {
    const present::Json j = {{"type", "file"},
                             {"file", display_name},
                             {"link_type", link},
                             {"link_type_name", reader->link_type_name()},
                             {"link_type_decoded", known_link},
                             {"frames", t.frames},
                             {"roce", t.roce},
                             {"native_ib", t.native_ib},
                             {"bad_icrc", t.bad_icrc},
                             {"malformed", t.malformed},
                             {"non_roce", t.non_roce}};
    out_line(present::json_line(j));
  } else {
    std::string s = "# " + name + ": " + std::to_string(t.frames) + " frames, " +
                    std::to_string(t.roce) + " RoCEv2";
    if (link == wire::kLinkTypeErf) s += ", " + std::to_string(t.native_ib) + " native InfiniBand";
    s += " (" + std::to_string(t.bad_icrc) + " bad ICRC), " + std::to_string(t.malformed) +
         " malformed, " + std::to_string(t.non_roce) + " not RoCEv2 (skipped); link type " +
         reader->link_type_name();
    if (!known_link) s += " is not decoded";
    out_line(s);
  }
  return status;
}

}  // namespace rocelab::decode
