// The UDP transport (udp_impl.h): sending. sendmmsg of up to 64 messages,
// each one datagram or a GSO run of equal-size ones (IPv4 segments' ICRCs
// made for the IDs the kernel gives them).
#include "emu/transport/udp_impl.h"

#include <netinet/udp.h>
#include <unistd.h>

#include <cstring>

#include "wire/byte_order.h"
#include "wire/icrc.h"
#include "wire/packet.h"

namespace rocelab::emu {

namespace {

bool is_loopback(const wire::IpAddr& a) {
  if (!a.v6) return a.b[0] == 127;
  for (size_t i = 0; i < 15; ++i) {
    if (a.b[i] != 0) return false;
  }
  return a.b[15] == 1;
}

bool same_endpoint(const wire::IpUdpInfo& a, const wire::IpUdpInfo& b) {
  return a.dst == b.dst && a.dport == b.dport && a.sport == b.sport && a.tclass == b.tclass &&
         a.ttl == b.ttl;
}

// The BTH destination QP of two datagrams is the same. Processes that share
// an address are told apart by it (src/host/reuseport_program.h): a GSO
// super-datagram reaches one of them, so a run never spans two QPs.
bool same_dest_qp(const Datagram& a, const Datagram& b) {
  if (a.payload.size() < 8 || b.payload.size() < 8) return false;
  return std::memcmp(a.payload.data() + 5, b.payload.data() + 5, 3) == 0;
}

// Whether datagram e shares its bytes with one of run (a fault injector's
// duplicate): such a pair cannot be two segments whose ICRCs differ.
bool shares_bytes(std::span<const Datagram> run, const Datagram& e) {
  for (const Datagram& x : run)
    if (x.payload.data() == e.payload.data()) return true;
  return false;
}

// XORs into the ICRC of segment k (k >= 1) of an IPv4 GSO run what makes it
// the ICRC for IPv4 Identification k; a second call undoes it (the same XOR).
// The payloads are the engine's (or the fault injector's) own, writable
// buffers; send() gives them back unchanged.
void set_segment_icrcs(std::span<const Datagram> run) {
  for (size_t k = 1; k < run.size(); ++k) {
    auto* p = const_cast<std::byte*>(run[k].payload.data());
    const size_t len = run[k].payload.size();
    const size_t rest = len - wire::kBthLen - wire::kIcrcLen;
    std::byte* icrc = p + len - wire::kIcrcLen;
    wire::store_le32(icrc, wire::load_le32(icrc) ^
                               wire::ipv4_id_icrc_delta(static_cast<uint16_t>(k), wire::kIpv4HeaderLen, rest));
  }
}

// Appends one control message at offset msg_controllen of m.msg_control (which
// has room for kCmsgBytes).
template <typename T>
void put_cmsg(msghdr& m, int level, int type, T value) {
  auto* c = reinterpret_cast<cmsghdr*>(static_cast<std::byte*>(m.msg_control) + m.msg_controllen);
  std::memset(c, 0, CMSG_SPACE(sizeof(T)));
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(sizeof(T));
  std::memcpy(CMSG_DATA(c), &value, sizeof(T));
  m.msg_controllen += CMSG_SPACE(sizeof(T));
}

}  // namespace

// Sends datagrams that all share one source port (one socket).
size_t UdpTransport::Impl::send_run(int fd, std::span<const Datagram> run) {
  size_t handed = 0, i = 0;
  while (i < run.size()) {
    // Build up to kTxMsgs messages, each one datagram or a GSO run.
    size_t nmsg = 0, niov = 0, j = i;
    while (j < run.size() && nmsg < kTxMsgs) {
      const Datagram& d = run[j];
      const bool gso_ok = (is_loopback(d.ip.dst) ? cfg.gso_loopback
                                                 : cfg.gso && (d.ip.dst.v6 || cfg.gso_ipv4)) &&
                          d.payload.size() >= wire::kBthLen + wire::kIcrcLen;
      size_t segs = 1, bytes = d.payload.size();
      tx_iov[niov] = {const_cast<std::byte*>(d.payload.data()), d.payload.size()};
      if (gso_ok) {
        const size_t seg = d.payload.size();
        while (j + segs < run.size() && segs < kMaxGsoSegments) {
          const Datagram& e = run[j + segs];
          if (!same_endpoint(d.ip, e.ip) || !same_dest_qp(d, e) || e.payload.size() > seg ||
              e.payload.empty() ||
              bytes + e.payload.size() > kMaxGsoBytes ||
              e.payload.size() < wire::kBthLen + wire::kIcrcLen ||
              shares_bytes(run.subspan(j, segs), e))
            break;
          tx_iov[niov + segs] = {const_cast<std::byte*>(e.payload.data()), e.payload.size()};
          bytes += e.payload.size();
          ++segs;
          if (e.payload.size() < seg) break;  // a shorter segment ends the run
        }
      }
      mmsghdr& mm = tx_msgs[nmsg];
      mm = {};
      msghdr& m = mm.msg_hdr;
      m.msg_name = &tx_to[nmsg];
      m.msg_namelen = to_sockaddr(d.ip.dst, d.ip.dport, tx_to[nmsg], cfg.scope_id);
      m.msg_iov = &tx_iov[niov];
      m.msg_iovlen = segs;
      m.msg_control = tx_cmsg[nmsg].data();
      m.msg_controllen = 0;
      if (segs > 1) put_cmsg<uint16_t>(m, SOL_UDP, UDP_SEGMENT, static_cast<uint16_t>(d.payload.size()));
      if (d.ip.dst.v6) {
        if (d.ip.tclass != 0) put_cmsg<int>(m, IPPROTO_IPV6, IPV6_TCLASS, d.ip.tclass);
        if (d.ip.ttl != 64) put_cmsg<int>(m, IPPROTO_IPV6, IPV6_HOPLIMIT, d.ip.ttl);
      } else {
        if (d.ip.tclass != 0) put_cmsg<int>(m, IPPROTO_IP, IP_TOS, d.ip.tclass);
        if (d.ip.ttl != 64) put_cmsg<int>(m, IPPROTO_IP, IP_TTL, d.ip.ttl);
      }
      if (m.msg_controllen == 0) m.msg_control = nullptr;
      tx_count[nmsg] = segs;
      // IPv4: the kernel gives segment k of a GSO send the Identification k
      // (unconnected DF socket: 0 for the first, then counting up; the
      // ICRC covers the ID). The datagrams came with ICRCs for ID 0: each
      // segment's is made the one for its ID here, and put back after the send.
      if (segs > 1 && !d.ip.dst.v6) set_segment_icrcs(run.subspan(j, segs));
      niov += segs;
      j += segs;
      ++nmsg;
    }
    size_t done = 0, reported_errors = 0;
    // The ICRCs of IPv4 GSO segments go back to ID 0 however the send ends.
    auto restore_icrcs = [&] {
      for (size_t k = 0, at = i; k < nmsg; at += tx_count[k], ++k)
        if (tx_count[k] > 1 && !run[at].ip.dst.v6) set_segment_icrcs(run.subspan(at, tx_count[k]));
    };
    while (done < nmsg) {
      int r = ::sendmmsg(fd, &tx_msgs[done], static_cast<unsigned>(nmsg - done), 0);
      if (r > 0) {
        for (size_t k = done; k < done + static_cast<size_t>(r); ++k) {
          handed += tx_count[k];
          stats.tx_datagrams += tx_count[k];
          for (size_t s = 0; s < tx_msgs[k].msg_hdr.msg_iovlen; ++s)
            stats.tx_bytes += tx_msgs[k].msg_hdr.msg_iov[s].iov_len;
          if (tx_count[k] > 1) ++ustats.gso_sends;
        }
        done += static_cast<size_t>(r);
        // A partial send: the next message may have met the pending ICMP
        // error of an earlier one (sendmmsg then reports only the count, and
        // the error is lost; the queued error itself is not).
        if (done < nmsg) read_errors(fd);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
        // Full: the rest are dropped, as a NIC would drop them (RC recovers).
        for (size_t k = done; k < nmsg; ++k) ustats.tx_dropped_full += tx_count[k];
        for (size_t k = j; k < run.size(); ++k) ++ustats.tx_dropped_full;
        restore_icrcs();
        return handed;
      }
      const int err = errno;
      read_errors(fd);  // what the error queue holds, whatever this error is
      if ((err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH) &&
          reported_errors++ < kTxMsgs) {
        // The pending ICMP error of an earlier datagram, reported by this send
        // (which did not go out): noted; now send this message again.
        continue;
      }
      stats.tx_errors += tx_count[done];  // this message is refused: skip it
      ++done;
    }
    restore_icrcs();
    i = j;
  }
  return handed;
}

size_t UdpTransport::send(std::span<const Datagram> batch) {
  Impl& m = *impl_;
  ++m.stats.tx_batches;
  size_t handed = 0, i = 0;
  while (i < batch.size()) {
    const Datagram& d = batch[i];
    // A datagram built for another source address would carry a wrong ICRC.
    auto fd = d.ip.src == m.local ? m.send_fd(d.ip.sport)
                                  : Result<int>(std::make_error_code(std::errc::invalid_argument));
    if (!fd) {
      ++m.stats.tx_errors;
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < batch.size() && batch[j].ip.sport == d.ip.sport && batch[j].ip.src == m.local)
      ++j;
    handed += m.send_run(*fd, batch.subspan(i, j - i));
    i = j;
  }
  return handed;
}

}  // namespace rocelab::emu
