#pragma once

#include <string>

namespace moelab::loadgen {

// Where an OpenAI-compatible server listens: "http://HOST:PORT[/PREFIX]" (--url). Requests go to
// PREFIX + "/v1/completions" (a prefix for a server behind a proxy path; none for vLLM,
// llama-server and moelab serve). Plain HTTP only: a load generator on the server's own network.
struct ServerUrl {
  std::string host;
  int port = 80;
  std::string prefix;  // "" or "/a/b", no trailing slash

  std::string CompletionsPath() const { return prefix + "/v1/completions"; }
  std::string ToString() const;
};

// Errors name `option` and the expected form.
ServerUrl ParseServerUrl(const std::string& text, const std::string& option = "--url");

}  // namespace moelab::loadgen
