#include "present/fields.h"

#include <cstdio>

namespace rocelab::present {

std::string hex(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

std::string qpn_text(uint32_t qpn) { return hex(qpn, 6); }

std::string rkey_text(uint32_t key) { return hex(key, 8); }

std::string_view aeth_kind(const wire::Aeth& a) {
  switch (a.kind()) {
    case wire::AckKind::kAck: return "ACK";
    case wire::AckKind::kRnrNak: return "RNR NAK";
    case wire::AckKind::kNak: return "NAK";
    case wire::AckKind::kReserved: return "reserved";
  }
  return "reserved";
}

std::string_view nak_name(uint8_t code) {
  return code <= 4 ? wire::to_string(static_cast<wire::NakCode>(code)) : "reserved";
}

std::string rnr_text(uint8_t timer) {
  return "RNR NAK timer=" + std::to_string(timer) + " (" + std::to_string(wire::rnr_timer_us(timer)) + " us)";
}

std::string aeth_text(const wire::Aeth& a) {
  switch (a.kind()) {
    case wire::AckKind::kAck: return "ACK credits=" + std::to_string(a.value5());
    case wire::AckKind::kRnrNak: return rnr_text(a.value5());
    case wire::AckKind::kNak:
      return "NAK " + std::to_string(a.value5()) + " (" + std::string(nak_name(a.value5())) + ")";
    case wire::AckKind::kReserved: break;
  }
  return "reserved syndrome=" + hex(a.syndrome, 2);
}

std::string aeth_brief(const wire::Aeth& a) {
  char buf[96];
  switch (a.kind()) {
    case wire::AckKind::kAck: return "ACK msn " + std::to_string(a.msn);
    case wire::AckKind::kRnrNak:
      std::snprintf(buf, sizeof buf, "RNR NAK %.2f ms", wire::rnr_timer_us(a.value5()) / 1000.0);
      return buf;
    case wire::AckKind::kNak: return "NAK " + std::string(nak_name(a.value5()));
    case wire::AckKind::kReserved: break;
  }
  return "syndrome " + hex(a.syndrome, 2);
}

}  // namespace rocelab::present
