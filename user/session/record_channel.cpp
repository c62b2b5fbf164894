#include "user/session/record_channel.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

namespace ember::record_channel {
namespace {

void write_all(int fd, const std::string& line) {
  for (size_t done = 0; done < line.size();) {
    ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string encode(const Message& m) {
  using nlohmann::json;
  json j;
  switch (m.kind) {
    case Message::Kind::Progress:
      j["progress"] = {{"seconds", m.seconds}, {"samples", m.samples}, {"lost", m.lost}};
      break;
    case Message::Kind::Warning: j["warning"] = m.text; break;
    case Message::Kind::Error: j["error"] = m.text; break;
    case Message::Kind::Done:
      j["done"] = {{"seconds", m.seconds}, {"samples", m.samples}, {"lost", m.lost}, {"outputs", m.outputs}};
      break;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<Message> decode(std::string_view line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || j.size() != 1) return std::nullopt;
  Message m;
  try {
    if (j.contains("progress") || j.contains("done")) {
      bool done = j.contains("done");
      const nlohmann::json& body = done ? j["done"] : j["progress"];
      m.kind = done ? Message::Kind::Done : Message::Kind::Progress;
      m.seconds = body.at("seconds").get<double>();
      m.samples = body.at("samples").get<uint64_t>();
      m.lost = body.at("lost").get<uint64_t>();
      if (done) m.outputs = body.at("outputs").get<std::vector<std::string>>();
    } else if (j.contains("warning")) {
      m.kind = Message::Kind::Warning;
      m.text = j["warning"].get<std::string>();
    } else if (j.contains("error")) {
      m.kind = Message::Kind::Error;
      m.text = j["error"].get<std::string>();
    } else {
      return std::nullopt;
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return m;
}

Writer::Writer(int fd) : fd_(fd) {}

void Writer::progress(double seconds, uint64_t samples, uint64_t lost) {
  if (fd_ < 0 || seconds - last_progress_ < 0.25) return;
  last_progress_ = seconds;
  std::string line = encode({.kind = Message::Kind::Progress, .seconds = seconds, .samples = samples, .lost = lost}) + "\n";
  int flags = fcntl(fd_, F_GETFL);
  fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  (void)!write(fd_, line.data(), line.size());  // all or nothing: a line is under PIPE_BUF
  fcntl(fd_, F_SETFL, flags);
}

void Writer::send(const Message& message) {
  if (fd_ >= 0) write_all(fd_, encode(message) + "\n");
}

}  // namespace ember::record_channel
