// What `ember record` tells a program that drives it (ember serve), as JSON
// lines on the descriptor given with --progress-fd, one object a line:
//   {"progress":{"seconds":1.25,"samples":420,"lost":0}}   4 times a second
//   {"warning":"..."}                                      as they arise
//   {"error":"..."}                     the recording failed: the last line
//   {"done":{"seconds":5.0,"samples":980,"lost":0,"outputs":["x.pb.gz"]}}
// The reader needs no knowledge of record's terminal output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::record_channel {

struct Message {
  enum class Kind { Progress, Warning, Error, Done } kind = Kind::Progress;
  double seconds = 0;   // Progress, Done
  uint64_t samples = 0;
  uint64_t lost = 0;
  std::string text = {};  // Warning, Error
  std::vector<std::string> outputs = {};  // Done: the files written
};

// One line, without its newline.
std::string encode(const Message& message);
// A line as encode() wrote it; nothing if it is not one.
std::optional<Message> decode(std::string_view line);

// The writing end. Progress never blocks (a reader that falls behind
// misses progress, not samples); warnings, errors and the end always reach it.
class Writer {
 public:
  explicit Writer(int fd);  // -1: nobody listens
  void progress(double seconds, uint64_t samples, uint64_t lost);
  void send(const Message& message);

 private:
  int fd_;
  double last_progress_ = -1;
};

}  // namespace ember::record_channel
