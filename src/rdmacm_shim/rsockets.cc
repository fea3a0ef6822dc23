// rsockets (rsocket.h), exported at RDMACM_1.0 as librdmacm.so.1 exports them,
// so a program that links them loads under `rocelab run`. Without emulated
// devices they are the real library's. With emulated devices rsocket() fails
// as librdmacm fails on a machine without the kernel's rdma_cm (errno ENODEV)
// and says why once on stderr: rsockets over src/cm are not implemented
// (docs/rdma-cm.md). The other calls act on rsocket descriptors, of which
// there are none then; they go to the real library, which answers EBADF
// (rpoll/rselect on ordinary descriptors work there as poll/select).
#include <rdma/rsocket.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>

#include "rdmacm_shim/real_rdmacm.h"
#include "rdmacm_shim/shim.h"

#define V10 "RDMACM_1.0"

extern "C" int rsocket(int domain, int type, int protocol) {
  if (rocelab::rdmacm_shim::State::get().emulated()) {
    static bool said = false;
    if (!said) {
      said = true;
      std::fprintf(stderr,
                   "rocelab: rsockets are not supported on emulated devices (rsocket: ENODEV); "
                   "the rdma_cm calls are (docs/rdma-cm.md)\n");
    }
    errno = ENODEV;
    return -1;
  }
  ROCELAB_FORWARD(rsocket, V10, -1, domain, type, protocol);
}

#define FWD(ret, name, params, ...) \
  extern "C" ret name params { ROCELAB_FORWARD(name, V10, -1, __VA_ARGS__); }

FWD(int, rbind, (int s, const struct sockaddr* addr, socklen_t addrlen), s, addr, addrlen)
FWD(int, rlisten, (int s, int backlog), s, backlog)
FWD(int, raccept, (int s, struct sockaddr* addr, socklen_t* addrlen), s, addr, addrlen)
FWD(int, rconnect, (int s, const struct sockaddr* addr, socklen_t addrlen), s, addr, addrlen)
FWD(int, rshutdown, (int s, int how), s, how)
FWD(int, rclose, (int s), s)
FWD(ssize_t, rrecv, (int s, void* buf, size_t len, int flags), s, buf, len, flags)
FWD(ssize_t, rrecvfrom, (int s, void* buf, size_t len, int flags, struct sockaddr* src, socklen_t* alen), s,
    buf, len, flags, src, alen)
FWD(ssize_t, rrecvmsg, (int s, struct msghdr* msg, int flags), s, msg, flags)
FWD(ssize_t, rsend, (int s, const void* buf, size_t len, int flags), s, buf, len, flags)
FWD(ssize_t, rsendto, (int s, const void* buf, size_t len, int flags, const struct sockaddr* dst, socklen_t alen),
    s, buf, len, flags, dst, alen)
FWD(ssize_t, rsendmsg, (int s, const struct msghdr* msg, int flags), s, msg, flags)
FWD(ssize_t, rread, (int s, void* buf, size_t count), s, buf, count)
FWD(ssize_t, rreadv, (int s, const struct iovec* iov, int iovcnt), s, iov, iovcnt)
FWD(ssize_t, rwrite, (int s, const void* buf, size_t count), s, buf, count)
FWD(ssize_t, rwritev, (int s, const struct iovec* iov, int iovcnt), s, iov, iovcnt)
FWD(int, rpoll, (struct pollfd * fds, nfds_t nfds, int timeout), fds, nfds, timeout)
FWD(int, rselect, (int nfds, fd_set* r, fd_set* w, fd_set* e, struct timeval* timeout), nfds, r, w, e, timeout)
FWD(int, rgetpeername, (int s, struct sockaddr* addr, socklen_t* addrlen), s, addr, addrlen)
FWD(int, rgetsockname, (int s, struct sockaddr* addr, socklen_t* addrlen), s, addr, addrlen)
FWD(int, rsetsockopt, (int s, int level, int optname, const void* optval, socklen_t optlen), s, level, optname,
    optval, optlen)
FWD(int, rgetsockopt, (int s, int level, int optname, void* optval, socklen_t* optlen), s, level, optname,
    optval, optlen)
FWD(off_t, riomap, (int s, void* buf, size_t len, int prot, int flags, off_t offset), s, buf, len, prot, flags,
    offset)
FWD(int, riounmap, (int s, void* buf, size_t len), s, buf, len)

extern "C" size_t riowrite(int s, const void* buf, size_t count, off_t offset, int flags) {
  auto real = ROCELAB_REAL_CM(riowrite, V10);
  if (!real) {
    errno = ENOSYS;
    return 0;
  }
  return real(s, buf, count, offset, flags);
}

// rfcntl's third argument is an int or a pointer (F_GETFL / F_SETFL are all
// rsockets supports); passed on as a pointer-sized value.
extern "C" int rfcntl(int s, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  ROCELAB_FORWARD(rfcntl, V10, -1, s, cmd, arg);
}
