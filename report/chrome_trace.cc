#include "report/chrome_trace.h"

#include <cstdio>
#include <utility>

#include <nlohmann/json.hpp>

namespace moelab::report {
namespace {

constexpr std::string_view kHeader = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";

// `text` as a JSON string, as nlohmann's dump() writes it. Op names and categories (many per
// trace) are plain printable ASCII and are copied straight; anything else goes through dump().
void AppendJsonString(std::string& out, std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x80 || c == '"' || c == '\\') {
      out += nlohmann::json(std::string(text)).dump();
      return;
    }
  }
  out += '"';
  out += text;
  out += '"';
}

void AppendMicroseconds(std::string& out, double seconds) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.3f", seconds * 1e6);
  out += text;
}

}  // namespace

ChromeTrace::ChromeTrace() : out_(kHeader) {}

void ChromeTrace::ProcessName(int pid, std::string_view name) {
  out_ += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
          ",\"tid\":0,\"args\":{\"name\":";
  AppendJsonString(out_, name);
  out_ += "}},\n";
  empty_ = false;
}

void ChromeTrace::ThreadName(int pid, int tid, std::string_view name) {
  out_ += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
          ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
  AppendJsonString(out_, name);
  out_ += "}},\n";
  empty_ = false;
}

void ChromeTrace::Complete(std::string_view name, std::string_view category, double start_s,
                           double duration_s, int pid, int tid, int64_t pass) {
  out_ += "{\"name\":";
  AppendJsonString(out_, name);
  out_ += ",\"cat\":";
  AppendJsonString(out_, category);
  out_ += ",\"ph\":\"X\",\"ts\":";
  AppendMicroseconds(out_, start_s);
  out_ += ",\"dur\":";
  AppendMicroseconds(out_, duration_s);
  out_ += ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
          ",\"args\":{\"pass\":" + std::to_string(pass) + "}},\n";
  empty_ = false;
}

void ChromeTrace::Counter(std::string_view name, double time_s, int pid,
                          const std::vector<std::pair<std::string_view, double>>& values) {
  out_ += "{\"name\":";
  AppendJsonString(out_, name);
  out_ += ",\"ph\":\"C\",\"ts\":";
  AppendMicroseconds(out_, time_s);
  out_ += ",\"pid\":" + std::to_string(pid) + ",\"args\":{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out_ += ',';
    AppendJsonString(out_, values[i].first);
    out_ += ':' + nlohmann::json(values[i].second).dump();
  }
  out_ += "}},\n";
  empty_ = false;
}

std::string ChromeTrace::Finish() {
  if (!empty_) out_.resize(out_.size() - 2);  // the last event's ",\n"
  out_ += "\n]}\n";
  std::string file = std::move(out_);
  out_ = kHeader;
  empty_ = true;
  return file;
}

}  // namespace moelab::report
