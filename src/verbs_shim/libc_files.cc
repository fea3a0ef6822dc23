// libc's stat, statx, access, open and fopen, interposed for the emulated devices'
// files (device_files.h) and passed through for every other path. Only in the
// preloaded library (not in the in-process test copy, where the sanitizers
// interpose the same functions). The exports carry glibc's own symbol
// versions (libc_files.map.in): a program's reference `stat@GLIBC_2.33` binds
// to the first definition of that name at that version.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "verbs_shim/device_files.h"
#include "verbs_shim/libc_next.h"

using rocelab::verbs_shim::DeviceFile;
using rocelab::verbs_shim::device_file;
using Kind = DeviceFile::Kind;

namespace {

int fail(int e) {
  errno = e;
  return -1;
}

int stat_of(const DeviceFile& f, struct stat* st) {
  switch (f.kind) {
    case Kind::kCharDevice: return ROCELAB_LIBC(stat)("/dev/null", st);
    case Kind::kDirectory: {
      const int r = ROCELAB_LIBC(stat)("/", st);
      if (r == 0) st->st_mode = S_IFDIR | 0555;
      return r;
    }
    case Kind::kFile:
      std::memset(st, 0, sizeof *st);
      st->st_mode = S_IFREG | 0444;
      st->st_nlink = 1;
      st->st_size = static_cast<off_t>(f.content.size());
      st->st_blksize = 4096;
      return 0;
    case Kind::kMissing:
    case Kind::kNotOurs:
      break;
  }
  return fail(ENOENT);
}

int open_of(const DeviceFile& f, int flags) {
  switch (f.kind) {
    case Kind::kCharDevice: return ROCELAB_LIBC(open)("/dev/null", flags & ~(O_CREAT | O_EXCL | O_TRUNC));
    case Kind::kDirectory:
      if ((flags & O_ACCMODE) != O_RDONLY) return fail(EISDIR);
      return ROCELAB_LIBC(open)("/", flags & ~(O_CREAT | O_EXCL | O_TRUNC));
    case Kind::kFile: {
      if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_DIRECTORY)) return fail(EACCES);
      const int fd = memfd_create("rocelab-sysfs", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
      if (fd < 0) return -1;
      if (::write(fd, f.content.data(), f.content.size()) != static_cast<ssize_t>(f.content.size()) ||
          ::lseek(fd, 0, SEEK_SET) != 0) {
        const int e = errno;
        ::close(fd);
        return fail(e);
      }
      return fd;
    }
    case Kind::kMissing:
    case Kind::kNotOurs:
      break;
  }
  return fail(ENOENT);
}

int access_of(const DeviceFile& f, int mode) {
  if (f.kind == Kind::kMissing) return fail(ENOENT);
  if (mode & X_OK && f.kind != Kind::kDirectory) return fail(EACCES);
  if (mode & W_OK && f.kind != Kind::kCharDevice) return fail(EACCES);
  return 0;
}

// open's optional third argument.
mode_t mode_arg(int flags, va_list ap) {
  return (flags & (O_CREAT | O_TMPFILE)) ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

}  // namespace

extern "C" {

int stat(const char* path, struct stat* st) {
  const DeviceFile f = device_file(path);
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(stat)(path, st) : stat_of(f, st);
}
int stat64(const char* path, struct stat64* st) {
  const DeviceFile f = device_file(path);
  if (f.kind == Kind::kNotOurs) return ROCELAB_LIBC(stat64)(path, st);
  return stat_of(f, reinterpret_cast<struct stat*>(st));  // the same layout on LP64
}
int lstat(const char* path, struct stat* st) {
  const DeviceFile f = device_file(path);
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(lstat)(path, st) : stat_of(f, st);
}
int lstat64(const char* path, struct stat64* st) {
  const DeviceFile f = device_file(path);
  if (f.kind == Kind::kNotOurs) return ROCELAB_LIBC(lstat64)(path, st);
  return stat_of(f, reinterpret_cast<struct stat*>(st));
}
int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  const DeviceFile f = device_file(path);  // an absolute path; a relative one is never ours
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(fstatat)(dirfd, path, st, flags) : stat_of(f, st);
}
int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  const DeviceFile f = device_file(path);
  if (f.kind == Kind::kNotOurs) return ROCELAB_LIBC(fstatat64)(dirfd, path, st, flags);
  return stat_of(f, reinterpret_cast<struct stat*>(st));
}
// What binaries built against glibc before 2.33 call for stat.
int __xstat(int ver, const char* path, struct stat* st) {
  const DeviceFile f = device_file(path);
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(__xstat)(ver, path, st) : stat_of(f, st);
}
int __xstat64(int ver, const char* path, struct stat64* st) {
  const DeviceFile f = device_file(path);
  if (f.kind == Kind::kNotOurs) return ROCELAB_LIBC(__xstat64)(ver, path, st);
  return stat_of(f, reinterpret_cast<struct stat*>(st));
}

// coreutils and newer programs: statx (glibc 2.28).
int statx(int dirfd, const char* path, int flags, unsigned int mask, struct statx* stx) {
  const DeviceFile f = device_file(path);
  if (f.kind == Kind::kNotOurs) return ROCELAB_LIBC(statx)(dirfd, path, flags, mask, stx);
  if (f.kind == Kind::kCharDevice) return ROCELAB_LIBC(statx)(AT_FDCWD, "/dev/null", 0, mask, stx);
  if (f.kind == Kind::kDirectory) {
    const int r = ROCELAB_LIBC(statx)(AT_FDCWD, "/", 0, mask, stx);
    if (r == 0) stx->stx_mode = S_IFDIR | 0555;
    return r;
  }
  if (f.kind == Kind::kMissing) return fail(ENOENT);
  std::memset(stx, 0, sizeof *stx);
  stx->stx_mask = STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_SIZE;
  stx->stx_mode = S_IFREG | 0444;
  stx->stx_nlink = 1;
  stx->stx_size = f.content.size();
  stx->stx_blksize = 4096;
  return 0;
}

int access(const char* path, int mode) {
  const DeviceFile f = device_file(path);
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(access)(path, mode) : access_of(f, mode);
}

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  const DeviceFile f = device_file(path);
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(open)(path, flags, mode) : open_of(f, flags);
}
int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  const DeviceFile f = device_file(path);
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(open64)(path, flags, mode) : open_of(f, flags);
}
int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  const DeviceFile f = device_file(path);
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(openat)(dirfd, path, flags, mode) : open_of(f, flags);
}
int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  const DeviceFile f = device_file(path);
  return f.kind == Kind::kNotOurs ? ROCELAB_LIBC(openat64)(dirfd, path, flags, mode) : open_of(f, flags);
}

FILE* fopen(const char* path, const char* mode) {
  const DeviceFile f = device_file(path);
  if (f.kind == Kind::kNotOurs || f.kind == Kind::kCharDevice) {
    return ROCELAB_LIBC(fopen)(f.kind == Kind::kCharDevice ? "/dev/null" : path, mode);
  }
  const bool writes = std::strpbrk(mode, "wa+") != nullptr;
  const int fd = open_of(f, (writes ? O_RDWR : O_RDONLY) | (std::strchr(mode, 'e') ? O_CLOEXEC : 0));
  if (fd < 0) return nullptr;
  FILE* fp = ::fdopen(fd, mode);
  if (fp == nullptr) ::close(fd);
  return fp;
}
FILE* fopen64(const char* path, const char* mode) { return fopen(path, mode); }

}  // extern "C"
