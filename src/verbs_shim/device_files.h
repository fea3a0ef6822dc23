// The files a program finds about an emulated device, as it finds them for
// Soft-RoCE (rxe): the uverbs character device and the port's GID attributes
// in sysfs. UCX, for one, takes a device only if /dev/infiniband/<dev_name>
// is a character device it may read and write, and reads the type and netdev
// of each GID from /sys/class/infiniband/<name>/ports/1/gid_attrs. Nothing
// is created on disk: libc_files.cc answers stat, access, open and fopen of
// these paths from here; every other path goes to libc untouched.
#pragma once
#include <string>

namespace rocelab::verbs_shim {

struct DeviceFile {
  enum class Kind {
    kNotOurs,     // not an emulated device's path: libc answers
    kMissing,     // an emulated device's path that does not exist (ENOENT)
    kCharDevice,  // /dev/infiniband/uverbs-<name>: behaves as /dev/null
    kDirectory,   // /sys/class/infiniband/<name> and the directories below it
    kFile,        // a sysfs attribute: `content` is what reading it gives
  };
  Kind kind = Kind::kNotOurs;
  std::string content;
};

// What path names. Cheap for paths outside /dev/infiniband/ and
// /sys/class/infiniband/ (a prefix compare), so it may sit in front of every
// stat and open of a process.
DeviceFile device_file(const char* path) noexcept;

}  // namespace rocelab::verbs_shim
