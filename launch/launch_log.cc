// The launcher's dated lines (launch_log.h).
#include "launch/launch_log.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "core/base/printable.h"

namespace dagsim::launch {

namespace {

std::string formatted(WallTime t, const char* format, bool millis, bool utc, char separator) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm parts{};
  if (utc) {
    ::gmtime_r(&seconds, &parts);
  } else {
    ::localtime_r(&seconds, &parts);
  }
  char text[64];
  const size_t n = std::strftime(text, sizeof text, format, &parts);
  std::string out(text, n);
  if (millis) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
    char frac[8];
    std::snprintf(frac, sizeof frac, "%c%03d", separator, static_cast<int>(ms < 0 ? ms + 1000 : ms));
    out += frac;
  }
  return out;
}

}  // namespace

std::string wall_stamp(WallTime t) { return formatted(t, "%Y-%m-%d %H:%M:%S", true, false, ','); }
std::string utc_iso(WallTime t) { return formatted(t, "%Y-%m-%dT%H:%M:%S", true, true, '.') + "Z"; }
std::string wall_clock(WallTime t) { return formatted(t, "%H:%M:%S", false, false, ','); }

WallTime wall_time_of(runtime::Clock& clock, runtime::TimePoint at) {
  // A deadline that saturated (TimePoint::max(): no timeout) is shown a century out, not overflowed.
  const runtime::Duration ahead = std::min<runtime::Duration>(at - clock.now(), std::chrono::hours(24 * 365 * 100));
  return std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(ahead);
}

void say(const std::string& line) {
  std::cerr << ("[" + wall_stamp(std::chrono::system_clock::now()) + "] dagsim launch: " + printable(line, kPathMax) + "\n")
            << std::flush;
}

void say_block(const std::string& heading, const std::string& block) {
  std::cerr << ("[" + wall_stamp(std::chrono::system_clock::now()) + "] dagsim launch: " + printable(heading, kPathMax) + "\n" +
                block)
            << std::flush;
}

}  // namespace dagsim::launch
