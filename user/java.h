// Java in a recording: attaching libember-agent.so to the JVMs in scope
// (or injecting it into `-- java ...`), telling the collector where each
// agent publishes its code map, and detaching at the end.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "user/collector.h"

namespace ember {

class JavaSession {
 public:
  // `agent_path`: libember-agent.so as ember sees it. `events`: what the
  // agent reports besides code, as agent options (",alloc=524288,live,lock").
  JavaSession(std::string agent_path, std::string events);
  ~JavaSession();
  JavaSession(const JavaSession&) = delete;
  JavaSession& operator=(const JavaSession&) = delete;

  // Attaches to each pid that is a HotSpot JVM and has the collector name
  // its JIT code. Failures are reported per JVM and do not stop the others;
  // pids that are not JVMs are passed over, or reported if `named` (the user
  // asked for them). Gives up on the rest once `stop` says so.
  void attach(const std::vector<pid_t>& pids, bool named, Collector& collector, const std::function<bool()>& stop);

  // For `-- CMD`: the JAVA_TOOL_OPTIONS that load the agent into any JVM the
  // command starts (existing options kept). Their code maps appear at
  // started_maps() ("{pid}" standing for each JVM's pid): see
  // Collector::expect_jvms.
  std::string tool_options(const std::string& existing, bool add_frame_pointers) const;
  std::string started_maps() const;

  // Stops every agent this session started and removes the code maps.
  void detach();

 private:
  std::string map_name(pid_t ns_pid) const;  // "/tmp/ember-<ember pid>-<pid>.jitmap", in the JVM's view
  std::string agent_path_;
  std::string events_;
  struct Attached {
    pid_t pid;
    std::string agent_path;  // as the JVM sees it
    std::string map_path;    // as ember sees it
  };
  std::vector<Attached> attached_;
};

// libember-agent.so next to the ember binary.
std::string default_agent_path();

}  // namespace ember
