// Where the processes of one machine that run rocelab find each other: the
// runtime directory. Everything a host shares lives below it (the address
// groups of src/host, the process registry behind `rocelab stat`), private to
// the user (mode 0700), as the kernel keeps a user's sockets to itself.
//
//   $ROCELAB_RUNTIME_DIR        when set (tests point it at a directory of their own)
//   $XDG_RUNTIME_DIR/rocelab    when XDG_RUNTIME_DIR is set (a login session's tmpfs)
//   /run/rocelab                for root
//   /tmp/rocelab-<uid>          otherwise
//
// Network namespaces are hosts: what belongs to one namespace goes below
// net_dir(), named after the namespace's inode, so two namespaces that share
// the file system never see each other's address groups.
#pragma once
#include <cstdint>
#include <string>

#include "wire/error.h"

namespace rocelab::host {

// The layout of everything below the runtime directory. A process that finds
// another version's layout refuses it, naming both (it never guesses).
inline constexpr uint32_t kLayoutVersion = 1;

// The runtime directory, created (0700) if missing. Errors: it cannot be
// created, or it exists but belongs to another user or is open to others
// (permission_denied: a directory someone else could write to is never trusted).
wire::Result<std::string> runtime_dir();

// <runtime_dir>/net-<inode of this thread's network namespace>, created.
wire::Result<std::string> net_dir();

// The inode of the calling thread's network namespace (/proc/thread-self/ns/net).
wire::Result<uint64_t> netns_inode();

// mkdir -p with mode 0700 for what it creates; ok when it exists as a directory.
std::error_code make_private_dirs(const std::string& path);

}  // namespace rocelab::host
