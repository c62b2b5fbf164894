// Splits text that arrives in pieces (a file another process appends to)
// into whole lines; a trailing partial line waits for the next piece.
#pragma once

#include <string>
#include <string_view>

namespace ember::symbolizer {

class LineBuffer {
 public:
  // Calls on_line(std::string_view) for each line `text` completes.
  template <class OnLine>
  void feed(std::string_view text, OnLine&& on_line) {
    while (!text.empty()) {
      size_t eol = text.find('\n');
      if (eol == std::string_view::npos) {
        partial_.append(text);
        return;
      }
      if (partial_.empty()) {
        on_line(text.substr(0, eol));
      } else {
        partial_.append(text.substr(0, eol));
        on_line(std::string_view(partial_));
        partial_.clear();
      }
      text.remove_prefix(eol + 1);
    }
  }

 private:
  std::string partial_;
};

}  // namespace ember::symbolizer
