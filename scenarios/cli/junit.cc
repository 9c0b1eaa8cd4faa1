#include "scenarios/cli/junit.h"

#include <cstdio>

namespace dagsim::cli {
namespace {

// The length of the well-formed UTF-8 sequence at text[i], or 0 when it is not one (overlong
// forms, surrogates and code points past U+10FFFF included: XML's Char production refuses them).
size_t utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  const uint32_t least = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
  if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  if (code == 0xFFFE || code == 0xFFFF) return 0;
  return length;
}

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", seconds < 0 ? 0.0 : seconds);
  return buffer;
}

struct Counts {
  size_t tests = 0, failures = 0, errors = 0, skipped = 0;
  void add(const JunitCase& c) {
    ++tests;
    failures += c.result == JunitCase::Result::failed;
    errors += c.result == JunitCase::Result::error;
    skipped += c.result == JunitCase::Result::skipped;
  }
  std::string attributes() const {
    return " tests=\"" + std::to_string(tests) + "\" failures=\"" + std::to_string(failures) + "\" errors=\"" +
           std::to_string(errors) + "\" skipped=\"" + std::to_string(skipped) + "\"";
  }
};

void write_case(std::string& out, const JunitSuite& suite, const JunitCase& c) {
  out += "    <testcase name=\"" + xml_escape(c.name) + "\" classname=\"" + xml_escape(suite.classname) + "\"";
  if (c.result == JunitCase::Result::passed) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  const std::string message = "message=\"" + xml_escape(c.message) + "\"";
  switch (c.result) {
    case JunitCase::Result::failed:
      out += "      <failure " + message + " type=\"check_failed\">" + xml_escape(c.text) + "</failure>\n";
      break;
    case JunitCase::Result::error:
      out += "      <error " + message + " type=\"run_error\">" + xml_escape(c.text) + "</error>\n";
      break;
    case JunitCase::Result::skipped:
      out += "      <skipped " + message + "/>\n";
      break;
    case JunitCase::Result::passed:
      break;
  }
  out += "    </testcase>\n";
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '&': out += "&amp;"; ++i; continue;
      case '<': out += "&lt;"; ++i; continue;
      case '>': out += "&gt;"; ++i; continue;
      case '"': out += "&quot;"; ++i; continue;
      case '\'': out += "&apos;"; ++i; continue;
      default: break;
    }
    if (c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7F)) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (const size_t length = utf8_length(text, i); length > 0) {
        out.append(text.substr(i, length));
        i += length;
        continue;
      }
    }
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
    out += escaped;
    ++i;
  }
  return out;
}

std::string junit_xml(const JunitReport& report) {
  Counts total;
  double total_seconds = 0;
  for (const JunitSuite& suite : report.suites) {
    for (const JunitCase& c : suite.cases) total.add(c);
    total_seconds += suite.seconds;
  }
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"" + xml_escape(report.name) + "\"" + total.attributes() + " time=\"" +
         seconds_text(total_seconds) + "\">\n";
  for (size_t id = 0; id < report.suites.size(); ++id) {
    const JunitSuite& suite = report.suites[id];
    Counts counts;
    for (const JunitCase& c : suite.cases) counts.add(c);
    out += "  <testsuite name=\"" + xml_escape(suite.name) + "\"" + counts.attributes() + " time=\"" +
           seconds_text(suite.seconds) + "\" timestamp=\"" + xml_escape(report.timestamp) + "\" id=\"" +
           std::to_string(id) + "\">\n";
    if (!report.properties.empty()) {
      out += "    <properties>\n";
      for (const auto& [name, value] : report.properties) {
        out += "      <property name=\"" + xml_escape(name) + "\" value=\"" + xml_escape(value) + "\"/>\n";
      }
      out += "    </properties>\n";
    }
    for (const JunitCase& c : suite.cases) write_case(out, suite, c);
    out += "  </testsuite>\n";
  }
  out += "</testsuites>\n";
  return out;
}

}  // namespace dagsim::cli
