#include "capture/pcap_reader.h"

#include <pcap/pcap.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rocelab::capture {

using wire::WireErrc;

struct PcapReader::State {
  pcap_t* p = nullptr;
  ~State() {
    if (p != nullptr) pcap_close(p);  // also closes the FILE
  }
};

PcapReader::PcapReader(std::unique_ptr<State> s) : s_(std::move(s)) {}
PcapReader::PcapReader(PcapReader&&) noexcept = default;
PcapReader& PcapReader::operator=(PcapReader&&) noexcept = default;
PcapReader::~PcapReader() = default;

wire::Result<PcapReader> PcapReader::open(const std::string& path, std::string* detail) {
  // fopen ourselves so that a missing file reports its errno, not a format error.
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    if (detail != nullptr) *detail = std::strerror(err);
    return std::error_code(err, std::generic_category());
  }
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  // Nanosecond precision: libpcap scales microsecond files up, so ts is exact for both.
  pcap_t* p = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (p == nullptr) {
    std::fclose(f);
    if (detail != nullptr) *detail = errbuf;
    return WireErrc::kNotCapture;
  }
  auto s = std::make_unique<State>();
  s->p = p;
  return PcapReader(std::move(s));
}

int PcapReader::link_type() const { return s_ ? pcap_datalink(s_->p) : -1; }

std::string PcapReader::link_type_name() const {
  const int dlt = link_type();
  const char* name = pcap_datalink_val_to_name(dlt);
  return name != nullptr ? name : "DLT " + std::to_string(dlt);
}

wire::Result<std::optional<CapturedFrame>> PcapReader::next(std::string* detail) {
  if (!s_) return WireErrc::kClosed;
  pcap_pkthdr* h = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(s_->p, &h, &data);
  if (rc == PCAP_ERROR_BREAK) return std::optional<CapturedFrame>{};  // end of file
  if (rc != 1) {
    if (detail != nullptr) *detail = pcap_geterr(s_->p);
    return WireErrc::kPcapIo;
  }
  CapturedFrame f;
  f.ts = std::chrono::seconds(h->ts.tv_sec) + std::chrono::nanoseconds(h->ts.tv_usec);
  f.data = std::span(reinterpret_cast<const std::byte*>(data), h->caplen);
  f.orig_len = h->len;
  return std::optional<CapturedFrame>(f);
}

}  // namespace rocelab::capture
