// The words rocelab uses for header fields, in one place: every command that
// prints a QPN, an R_Key, an AETH or a NAK code prints it the same way.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "wire/aeth.h"

namespace rocelab::present {

// "0x" followed by at least `digits` lower-case hex digits.
std::string hex(uint64_t v, int digits = 1);
std::string qpn_text(uint32_t qpn);   // "0x000011": 24 bits, six digits
std::string rkey_text(uint32_t key);  // "0x00001234"

std::string_view aeth_kind(const wire::Aeth& a);  // "ACK", "RNR NAK", "NAK", "reserved"
std::string_view nak_name(uint8_t code);          // "PSN sequence error", ..., "reserved"

// An RNR NAK's timer field and the delay it asks for: "RNR NAK timer=14 (1280 us)".
std::string rnr_text(uint8_t timer);

// An AETH in full, as `rocelab decode` prints it:
// "ACK credits=31", "NAK 0 (PSN sequence error)", "RNR NAK timer=14 (1280 us)".
std::string aeth_text(const wire::Aeth& a);

// An AETH in a ladder's arrow label, where width is short:
// "ACK msn 7", "NAK PSN sequence error", "RNR NAK 1.28 ms".
std::string aeth_brief(const wire::Aeth& a);

}  // namespace rocelab::present
