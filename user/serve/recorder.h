// One profile at a time for `ember serve`: each runs as its own
// `ember record` process (so a crash, or a browser going away, cannot take
// the server or the result with it), writing a pprof into the results
// directory; when it ends, the flamegraph and folded stacks are made from
// that pprof and the result's description is saved.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <expected>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "user/events/event.h"
#include "user/serve/results.h"

namespace ember {

// A process's name (/proc/PID/comm); empty once it is gone.
std::string process_name(uint32_t pid);

// The events a browser may ask for, by the names results use.
const std::vector<std::string>& serve_events();

struct RecordRequest {
  std::string event = "cpu";  // one of serve_events()
  uint32_t pid = 0;           // 0: the whole host
  uint64_t frequency = 0;     // Hz for cpu and wall; 0: record's default
  uint64_t interval = 0;      // bytes between samples for alloc and malloc; 0: record's default
  std::string min_block;      // offcpu and lock: shortest block kept ("1ms"); empty: record's default
  double duration = 0;        // seconds; 0: until stopped
};

// Checks a request before anything runs: the reason it is wrong, if it is.
std::expected<void, std::string> check_request(const RecordRequest& request);
// The settings a request gives, over record's defaults.
events::Settings settings_of(const RecordRequest& request);
// `ember record` arguments (after "record") for a request writing `pprof`.
std::vector<std::string> record_arguments(const RecordRequest& request, const std::string& pprof, int progress_fd);

struct RecorderStatus {
  enum class State { Idle, Running, Stopping } state = State::Idle;
  ResultInfo result;      // the running one
  RecordRequest request;
  double elapsed = 0;     // seconds, from ember record's progress lines
  uint64_t samples = 0;
  uint64_t lost = 0;
};

class Recorder {
 public:
  // `ember_path`: the ember binary to run; `view`: the JSON of the view new
  // flamegraphs open in, read when each is written.
  Recorder(const ResultStore& store, std::string ember_path, std::function<std::string()> view);
  ~Recorder();  // stops a running profile and waits for its result
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  enum class StartError { Busy, Invalid, Failed };
  struct Refusal {
    StartError why;
    std::string message;
  };
  // Starts a profile; its result id.
  std::expected<std::string, Refusal> start(const RecordRequest& request);
  // Asks the running profile to stop (it writes its result); false if none runs.
  bool request_stop();
  // The result of profile `id` once it is written, waiting up to `timeout_s`.
  std::optional<ResultInfo> wait_result(const std::string& id, double timeout_s);
  RecorderStatus status() const;
  // Waits until no profile runs (one with a duration ends by itself).
  void wait_idle();

 private:
  void follow(pid_t child, int progress_fd, ResultInfo result);  // the watcher thread
  // `error`: what ember record said went wrong, if it did.
  void finish(ResultInfo& result, int wait_status, const std::string& error);

  const ResultStore& store_;
  std::string ember_path_;
  std::function<std::string()> view_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  RecorderStatus status_;
  pid_t child_ = 0;
  std::optional<ResultInfo> last_;  // the result of the latest profile to end
  std::thread watcher_;
};

}  // namespace ember
