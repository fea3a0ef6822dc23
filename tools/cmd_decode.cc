// `rocelab decode FILE...`: one line per RoCEv2 packet in pcap/pcapng captures.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/decode_format.h"
#include "tools/decode_summary.h"
#include "tools/json_line.h"
#include "wire/frame.h"
#include "wire/ib_native.h"
#include "wire/pcap_reader.h"

namespace rocelab::tools {
namespace {

constexpr int kExitOk = 0, kExitBadPackets = 1, kExitUnreadable = 2;

constexpr const char* kExitCodes =
    "Exit codes:\n"
    "  0  every file was read, every RoCEv2 packet decoded with a good ICRC\n"
    "  1  every file was read, but some RoCEv2 packet was malformed or had a BAD ICRC\n"
    "  2  some file could not be read as a capture (or the command line was wrong)\n\n"
    "Packets that are not UDP to port 4791 are counted and skipped; so are the\n"
    "frames of link types other than Ethernet, raw IP, Linux SLL/SLL2 and ERF.\n"
    "ERF captures of native InfiniBand (LRH [GRH] BTH ... ICRC VCRC) are decoded\n"
    "too, marked [native IB], with the native ICRC rule.";

struct Options {
  std::vector<std::string> files;
  bool json = false;
  bool summary = false;
};

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

void out_line(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

// What can be said about a frame that shows UDP port 4791 but does not decode.
Malformed describe_malformed(int link_type, const wire::CapturedFrame& f, std::error_code ec) {
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

// Decodes one file; returns its exit status (kExitOk, kExitBadPackets or kExitUnreadable).
int decode_file(const Options& o, const std::string& path, Summary& summary) {
  std::string detail;
  auto reader = wire::PcapReader::open(path, &detail);
  if (!reader) {
    std::string why = reader.error().message();
    if (!detail.empty() && detail != why) why += " (" + detail + ")";
    std::fprintf(stderr, "rocelab decode: %s: cannot read as a capture: %s\n", path.c_str(),
                 why.c_str());
    return kExitUnreadable;
  }
  const int link = reader->link_type();
  FileTally t;
  std::chrono::nanoseconds first{0};
  int status = kExitOk;
  for (;;) {
    auto next = reader->next(&detail);
    if (!next) {
      std::fprintf(stderr, "rocelab decode: %s: damaged capture after frame %llu: %s\n",
                   path.c_str(), static_cast<unsigned long long>(t.frames), detail.c_str());
      status = kExitUnreadable;
      break;
    }
    if (!next->has_value()) break;
    const wire::CapturedFrame& f = **next;
    if (t.frames == 0) first = f.ts;
    ++t.frames;
    const FrameRef ref{path, t.frames, f.ts, f.ts - first};
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
  const bool known_link = wire::link_type_supported(link) || link == wire::kLinkTypeErf;
  if (o.json) {
    JsonLine j;
    j.str("type", "file").str("file", path).num("link_type", static_cast<uint64_t>(link));
    j.str("link_type_name", reader->link_type_name()).boolean("link_type_decoded", known_link);
    j.num("frames", t.frames).num("roce", t.roce).num("native_ib", t.native_ib);
    j.num("bad_icrc", t.bad_icrc);
    j.num("malformed", t.malformed).num("non_roce", t.non_roce);
    out_line(j.done());
  } else {
    std::string s = "# " + path + ": " + std::to_string(t.frames) + " frames, " +
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

}  // namespace

void register_decode(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("decode", "Decode RoCEv2 packets in pcap/pcapng captures");
  cmd->add_option("files", o->files, "Capture files (pcap or pcapng)")->required();
  cmd->add_flag("--json", o->json,
                "One JSON object per line: \"type\" is packet, malformed, file or qp");
  cmd->add_flag("--summary", o->summary, "End with a table per QP (source, destination, dest QP)");
  cmd->footer(kExitCodes);
  cmd->callback([o] {
    Summary summary;
    int status = kExitOk;
    for (const std::string& path : o->files) status = std::max(status, decode_file(*o, path, summary));
    if (o->summary) {
      if (o->json) {
        for (const std::string& line : summary.json()) out_line(line);
      } else {
        const std::string text = summary.text();
        std::fwrite(text.data(), 1, text.size(), stdout);
      }
    }
    std::fflush(stdout);
    exit_code() = status;
  });
}

}  // namespace rocelab::tools
