// What ember places in a JVM's /tmp: the private directory through which
// its agent hands ember its stream, and, for a JVM in a container, a copy of
// the agent library.
//
// The private directory through which a JVM's agent hands ember its stream
// (code map and Java events). ember makes it in the JVM's /tmp under a
// random name, mode 0700, owned by the JVM's user, so no other local user
// can place, replace or read anything in it; the agent creates its file
// there with O_EXCL|O_NOFOLLOW, and ember reads it only if it is a regular
// file of that user. ember holds a shared flock on the directory while it
// reads: the agent's `lease` (it stops and cleans up after an ember that
// was killed) and the sweep of stale directories both go by that lock.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <expected>
#include <functional>
#include <string>
#include <vector>

#include "symbolizer/jit_map.h"
#include "user/java/java_events.h"

namespace ember {

// Where a JVM's stream goes on (agent/protocol.h's R line): opens the
// file `next` for reading and removes `read`, which is read to its end;
// -1 if it cannot.
using StreamFiles = std::function<int(const std::string& read, const std::string& next)>;

// Reads what a JVM's stream gained since the last call into `map` (and
// `events`, if given), going on into the next file at an R line: `fd`
// and `file` follow it. False when that file could not be opened: the
// stream is cut there, and `fd` is -1.
bool read_agent_stream(int& fd, std::string& file, const StreamFiles& files, symbolizer::JitMap& map,
                       java::JavaEvents* events);

class AgentDir {
 public:
  // A new directory in ROOT/tmp for a JVM of user `uid`/`gid`. ROOT is the
  // JVM's file system as ember sees it: "" for ember's own, "/proc/PID/root".
  static std::expected<AgentDir, std::string> create(const std::string& root, uid_t uid, gid_t gid);
  AgentDir(AgentDir&& other) noexcept;
  AgentDir& operator=(AgentDir&&) = delete;
  AgentDir(const AgentDir&) = delete;
  ~AgentDir();  // removes it, with the files in it, and lets go of the lock

  // The directory as the JVM sees it ("/tmp/ember-PID-XXXXXX"), for the agent's out=.
  const std::string& path() const { return path_; }
  // The file NAME in it, opened for reading, if it is a regular file owned
  // by the directory's user (never a link, FIFO or another user's file);
  // -1 if there is none (yet).
  int open_file(const std::string& name) const;
  // The names of the files in it.
  std::vector<std::string> names() const;
  // Removes the file NAME in it (a stream's file read to its end).
  void remove_file(const std::string& name) const;

 private:
  AgentDir() = default;
  int tmp_fd_ = -1;   // ROOT/tmp
  int fd_ = -1;       // the directory itself, with the shared lock
  std::string name_;  // its name in ROOT/tmp
  std::string path_;
  uid_t uid_ = 0;
};

// The agent library at `agent` as a JVM with file system ROOT can load it:
// a copy in ROOT/tmp, owned by ember's user and writable by nobody else,
// named by the library's size and time so that attaching again loads the
// library the JVM has already (HotSpot never unloads one). A file at that
// name that is not such a copy (a user in the container placed it) is never
// handed to the JVM: a copy under a name of its own is.
std::expected<std::string, std::string> place_agent_library(const std::string& root, const std::string& agent);

// Removes the agent directories in ROOT/tmp that no ember holds any more
// (it was killed, and the JVM is gone too, or its agent had no lease), with
// their files. Returns how many.
size_t sweep_agent_dirs(const std::string& root);

}  // namespace ember
