// Log: structured events from core code (the fifth part of the Env seam). The simulator folds
// them into its trace and trace hash, so an event's text must be a function of the run's inputs
// (no pointers, no wall time, no unordered iteration).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dagsim::runtime {

class Log {
 public:
  virtual ~Log() = default;
  virtual void event(std::string_view kind, std::string_view detail) = 0;
};

// Keeps every event in memory, for tests.
class MemoryLog final : public Log {
 public:
  struct Entry {
    std::string kind;
    std::string detail;
  };
  void event(std::string_view kind, std::string_view detail) override {
    entries_.push_back({std::string(kind), std::string(detail)});
  }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

}  // namespace dagsim::runtime
