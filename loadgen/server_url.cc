#include "loadgen/server_url.h"

#include <cctype>

#include "base/error.h"
#include "base/message_text.h"

namespace moelab::loadgen {

std::string ServerUrl::ToString() const {
  return "http://" + host + ":" + std::to_string(port) + prefix;
}

ServerUrl ParseServerUrl(const std::string& text, const std::string& option) {
  auto fail = [&](const std::string& why) -> ServerUrl {
    throw base::Error(option + " '" + base::EscapeForMessage(text) + "': " + why +
                      " (expected http://HOST:PORT, e.g. http://127.0.0.1:8000)");
  };
  const std::string scheme = "http://";
  if (text.rfind("https://", 0) == 0) return fail("https is not supported (plain HTTP only)");
  if (text.rfind(scheme, 0) != 0) return fail("not an http:// URL");
  const std::string rest = text.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  ServerUrl url;
  if (slash != std::string::npos) {
    url.prefix = rest.substr(slash);
    while (!url.prefix.empty() && url.prefix.back() == '/') url.prefix.pop_back();
    for (const char c : url.prefix) {
      if (std::isspace(static_cast<unsigned char>(c)) || c == '?' || c == '#' ||
          !std::isprint(static_cast<unsigned char>(c)))
        return fail("the path may not hold spaces, '?', '#' or control bytes");
    }
  }
  const size_t colon = authority.rfind(':');
  url.host = authority.substr(0, colon);
  if (url.host.empty()) return fail("no host");
  for (const char c : url.host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
      return fail("the host may hold letters, digits, '.', '-' and '_' only");
  }
  if (colon != std::string::npos) {
    const std::string port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos)
      return fail("the port is not a number");
    url.port = std::stoi(port);
    if (url.port < 1 || url.port > 65535) return fail("the port must be in 1..65535");
  }
  return url;
}

}  // namespace moelab::loadgen
