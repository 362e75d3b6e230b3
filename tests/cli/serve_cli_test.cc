// moelab serve as a client sees it: a server the test starts on a free loopback port (--port 0,
// the port read from its "listening on" line), spoken to with cpp-httplib's client.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "executor/generation.h"
#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

extern char** environ;

namespace moelab::cli {
namespace {

using nlohmann::json;

const std::string kShape =
    "--layers 2 --hidden 64 --intermediate 96 --experts 4 --top-k 2 --heads 4 --kv-heads 2 "
    "--head-dim 16 --vocab 101 --threads 2 --seed 3";
// A shape whose decode steps take milliseconds, so a long request is still running while the test
// looks at it: each token streams its two experts' 25 MB a layer (about 3 ms a token at this
// machine's DRAM bandwidth), so 3,000 tokens take seconds even on an idle machine. (Hidden 256
// finished 3,000 tokens in under 2 s idle, before a client's 2-s timeout.)
const std::string kSlowShape =
    "--layers 4 --hidden 1024 --intermediate 2048 --experts 4 --top-k 2 --heads 8 --kv-heads 4 "
    "--head-dim 128 --vocab 1000 --threads 2 --seed 3";

// A `moelab serve` process on a free port; SIGKILLed at destruction unless Stop()ped.
class Server {
 public:
  explicit Server(const std::string& args, const std::string& shape = kShape) {
    dir_ = testing::MakeTempDir("serve");
    std::vector<std::string> words = {MOELAB_BINARY, "serve"};
    std::istringstream split(shape + " --port 0 " + args);
    for (std::string word; split >> word;) words.push_back(word);
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addopen(&actions, 2, (dir_ / "err").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    stdout_ = fdopen(out[0], "r");
    char line[256] = {};
    const bool got = fgets(line, sizeof line, stdout_) != nullptr;
    const std::string text = line;
    // Read without <regex>: g++ 12 under -fsanitize=address warns inside std::regex (GCC bug
    // 105616).
    const std::string prefix = "listening on http://127.0.0.1:";
    const std::string digits = text.substr(std::min(prefix.size(), text.size()));
    const bool port_line = got && text.rfind(prefix, 0) == 0 && digits.size() >= 2 &&
                           digits.back() == '\n' &&
                           digits.find_first_not_of("0123456789") == digits.size() - 1;
    if (port_line)
      port_ = std::stoi(digits);
    else
      ADD_FAILURE() << "no 'listening on' line; stdout '" << text << "', stderr: " << Err();
  }
  ~Server() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdout_) fclose(stdout_);
    std::filesystem::remove_all(dir_);
  }
  int port() const { return port_; }
  std::string Err() const { return testing::Slurp(dir_ / "err"); }
  // Sends `signal` and returns the exit status (-1: killed by a signal).
  int Stop(int signal = SIGTERM) {
    kill(pid_, signal);
    int raw = 0;
    waitpid(pid_, &raw, 0);
    pid_ = -1;
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
  pid_t pid() const { return pid_; }
  void Forget() { pid_ = -1; }  // the process was reaped by the test

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  int port_ = 0;
};

httplib::Result Post(int port, const json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  return client.Post("/v1/completions", body.dump(), "application/json");
}

// The server-sent events of a body: the JSON of every "data:" line but the last, which must be
// [DONE]; every event ends with a blank line.
std::vector<json> Events(const std::string& body) {
  std::vector<json> events;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line: " << body.substr(at);
    if (end == std::string::npos) break;
    const std::string event = body.substr(at, end - at);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    const std::string data = event.substr(6);
    at = end + 2;
    if (data == "[DONE]") {
      EXPECT_EQ(at, body.size()) << "events after [DONE]";
      return events;
    }
    events.push_back(json::parse(data));
  }
  ADD_FAILURE() << "no data: [DONE] at the end";
  return events;
}

// A metric's value in /metrics' text.
double Metric(int port, const std::string& name) {
  httplib::Client client("127.0.0.1", port);
  const httplib::Result r = client.Get("/metrics");
  EXPECT_TRUE(r && r->status == 200);
  if (!r) return -1;
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  ADD_FAILURE() << name << " not in /metrics:\n" << r->body;
  return -1;
}

// Polls `name` until it equals `value` (30 s at most).
bool MetricBecomes(int port, const std::string& name, double value) {
  for (int i = 0; i < 300; ++i) {
    if (Metric(port, name) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(Serve, AnswersEqualMoelabRunsGreedyTokens) {
  const testing::CliRun run = testing::RunMoelab(
      "run " + kShape + " --workload decode --batch 2 --prompt 6 --tokens 5 --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const json outputs = json::parse(run.out)["outputs"];
  // moelab run's prompts: seeded synthetic ones, drawn here the same way.
  const auto prompts = executor::SyntheticPrompts(2, 6, 101, 3);
  Server server("");
  for (size_t i = 0; i < prompts.size(); ++i) {
    const httplib::Result r = Post(server.port(), {{"prompt", prompts[i]}, {"max_tokens", 5}});
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << r->body;
    const json answer = json::parse(r->body);
    EXPECT_EQ(answer["object"], "text_completion");
    EXPECT_EQ(answer["choices"][0]["token_ids"], outputs[i]);
    EXPECT_EQ(answer["choices"][0]["finish_reason"], "length");
    EXPECT_TRUE(answer["choices"][0]["text"].is_string());
    EXPECT_EQ(answer["usage"],
              json({{"prompt_tokens", 6}, {"completion_tokens", 5}, {"total_tokens", 11}}));
  }
  httplib::Client client("127.0.0.1", server.port());
  const httplib::Result models = client.Get("/v1/models");
  ASSERT_TRUE(models && models->status == 200);
  const json model = json::parse(models->body)["data"][0];
  EXPECT_EQ(model["id"], "mixtral-8x7b");
  // The settings behind the answers, as sim serve's reports print the scheduler.
  EXPECT_EQ(model["moelab"]["scheduler"]["kv_blocks"], 1024);
  EXPECT_EQ(model["moelab"]["scheduler"]["kv_block_tokens"], 16);
  EXPECT_EQ(model["moelab"]["scheduler"]["max_sequence_tokens"], model["max_model_len"]);
  EXPECT_FALSE(model["moelab"].contains("speculative"));
  EXPECT_FALSE(model["moelab"].contains("offload"));
  const httplib::Result health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(Metric(server.port(), "moelab_requests_total{outcome=\"completed\"}"), 2);
  EXPECT_EQ(Metric(server.port(), "moelab_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(Metric(server.port(), "moelab_kv_blocks_total"), 1024);
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Err();
}

// The settings a server runs with are printed at start (stderr, one line) and in /v1/models:
// speculative decoding's gamma and acceptance, the offload policy, the scheduler's options.
TEST(Serve, PrintsItsSettingsAtStartAndInModels) {
  const std::string store = testing::MakeTempDir("serve-settings");
  Server server(
      "--gamma 2 --alpha 0.5 --max-running 3 --offload on-demand --expert-memory 100KB "
      "--offload-dir " +
      store);
  httplib::Client client("127.0.0.1", server.port());
  const httplib::Result models = client.Get("/v1/models");
  ASSERT_TRUE(models && models->status == 200);
  const json settings = json::parse(models->body)["data"][0]["moelab"];
  EXPECT_EQ(settings["scheduler"]["max_running_sequences"], 3);
  EXPECT_EQ(settings["scheduler"]["decode_tokens_per_step"], 3);
  EXPECT_EQ(settings["speculative"]["gamma"], 2);
  EXPECT_EQ(settings["speculative"]["acceptance"], "alpha-coin");  // as run's sd.acceptance
  EXPECT_EQ(settings["speculative"]["alpha"], 0.5);
  EXPECT_EQ(settings["offload"]["policy"], "on-demand");
  EXPECT_EQ(settings["offload"]["expert_memory_bytes"], 100000);
  EXPECT_EQ(settings["threads"], 2);  // the shape's --threads 2
  EXPECT_EQ(settings["device"], "cpu");
  EXPECT_EQ(settings["seed"], 3);
  const std::string err = server.Err();
  const std::string line = "moelab serve: mixtral-8x7b, settings " + settings.dump() + "\n";
  EXPECT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Err();
  std::filesystem::remove_all(store);
}

// The two commands together as a user runs them: moelab loadgen's open-loop Poisson load against
// a moelab serve process; every request completes, the report's counts agree with the server's
// own metrics, and its latencies are positive and ordered.
TEST(Serve, LoadgenAgainstServeEndToEnd) {
  Server server("");
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  // Token ids beyond the served vocabulary (loadgen's default --vocab is 256, the test model's
  // 101): every request refused, and the message says which option to set.
  const testing::CliRun refused =
      testing::RunMoelab("loadgen --url " + url +
                         " --arrivals poisson:50 --requests 3 --prompt-tokens 40 "
                         "--output-tokens 2 --seed 5 --json");
  EXPECT_EQ(refused.status, 1);
  EXPECT_EQ(refused.out, "");
  // Each refusal names its own token id: three distinct errors, one shown.
  EXPECT_NE(refused.err.find("3 failed, 3 distinct errors, each once, e.g.: http 400"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("outside the vocabulary"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("(--vocab 256: at most the served model's vocabulary)"),
            std::string::npos)
      << refused.err;
  const testing::CliRun load = testing::RunMoelab(
      "loadgen --url " + url +
      " --arrivals poisson:20 --requests 8 --prompt-tokens uniform:3,9 --output-tokens 4 "
      "--vocab 101 --model mixtral-8x7b --seed 5 --json");
  ASSERT_EQ(load.status, 0) << load.err;
  const json report = json::parse(load.out);
  EXPECT_EQ(report["schema"], "moelab.serving/1");
  EXPECT_EQ(report["completed"], 8);
  EXPECT_EQ(report["failed"], 0);
  EXPECT_EQ(report["model"], "mixtral-8x7b");
  EXPECT_GT(report["ttft_s"]["p50"].get<double>(), 0);
  EXPECT_LE(report["ttft_s"]["p50"].get<double>(), report["ttft_s"]["p99"].get<double>());
  EXPECT_GT(report["tpot_s"]["mean"].get<double>(), 0);
  EXPECT_GE(report["e2e_s"]["p50"].get<double>(), report["ttft_s"]["p50"].get<double>());
  // 8 requests x 4 tokens, every one streamed: 7 gaps between tokens per request.
  EXPECT_GT(report["throughput_tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(report["tpot_s"]["count"], 8);
  EXPECT_EQ(report["itl_s"]["count"], 8 * 3);
  EXPECT_EQ(Metric(server.port(), "moelab_requests_total{outcome=\"completed\"}"), 8);
  EXPECT_EQ(Metric(server.port(), "moelab_time_to_first_token_seconds_count"), 8);
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Err();
}

// moelab serve --offload: /metrics counts the expert activations, hits and reads, and the storage
// tier's bytes and busy seconds (the bandwidth the served reads got); without --offload there are
// no offload metrics.
TEST(Serve, OffloadCountersAreInMetrics) {
  const std::string store = testing::MakeTempDir("serve-offload");
  Server server("--offload on-demand --expert-memory 100KB --offload-dir " + store);
  const httplib::Result r = Post(server.port(), {{"prompt", "hello"}, {"max_tokens", 4}});
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  const double activations = Metric(server.port(), "moelab_offload_expert_activations_total");
  const double hits = Metric(server.port(), "moelab_offload_expert_hits_total");
  const double fetches = Metric(server.port(), "moelab_offload_demand_fetches_total");
  // 2 layers x at least top-2 experts x 4 passes (the prompt's and 3 decodes).
  EXPECT_GE(activations, 2 * 2 * 4);
  EXPECT_EQ(hits + fetches, activations);
  EXPECT_GT(fetches, 0);
  EXPECT_GT(Metric(server.port(), "moelab_offload_storage_reads_total"), 0);
  EXPECT_GT(Metric(server.port(), "moelab_offload_storage_read_bytes_total"), 0);
  EXPECT_GT(Metric(server.port(), "moelab_offload_storage_busy_seconds_total"), 0);
  EXPECT_GT(Metric(server.port(), "moelab_offload_copied_bytes_total"), 0);
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Err();

  Server plain("");
  httplib::Client client("127.0.0.1", plain.port());
  const httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_EQ(metrics->body.find("moelab_offload_"), std::string::npos);
  EXPECT_EQ(plain.Stop(SIGTERM), 0) << plain.Err();
}

// An engine that failed (its store's bytes flipped under it: a checksum mismatch ends the pass)
// serves nothing more: the request gets 500 naming why, and the server exits 1 by itself. It
// stayed up answering every later request "503 shutting down, retry" for good.
TEST(Serve, AFailedEngineEndsTheServer) {
  const std::string store = testing::MakeTempDir("serve-failed-engine");
  Server server("--offload on-demand --expert-memory 100KB --offload-dir " + store);
  for (const auto& entry : std::filesystem::directory_iterator(store)) {
    if (entry.path().extension() != ".experts") continue;
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    for (size_t i = 0; i < bytes.size(); i += 4096) bytes[i] = static_cast<char>(~bytes[i]);
    file.seekp(0);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const httplib::Result r = Post(server.port(), {{"prompt", "hello there"}, {"max_tokens", 4}});
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 500) << r->body;
  EXPECT_NE(r->body.find("checksum mismatch"), std::string::npos) << r->body;
  int raw = 0;
  pid_t done = 0;
  for (int i = 0; i < 100 && done == 0; ++i) {  // up to 10 s
    done = waitpid(server.pid(), &raw, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(done, server.pid()) << "the server is still up: " << server.Err();
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 1) << server.Err();
  EXPECT_NE(server.Err().find("the serving engine failed"), std::string::npos) << server.Err();
  server.Forget();
  std::filesystem::remove_all(store);
}

TEST(Serve, StreamsOneChunkPerTokenEndingInDone) {
  Server server("");
  const json body = {{"prompt", "hello"}, {"max_tokens", 4}};
  const httplib::Result whole = Post(server.port(), body);
  ASSERT_TRUE(whole && whole->status == 200);
  json streamed_body = body;
  streamed_body["stream"] = true;
  const httplib::Result r = Post(server.port(), streamed_body);
  ASSERT_TRUE(r && r->status == 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<json> events = Events(r->body);
  ASSERT_EQ(events.size(), 5u) << "four token chunks and the last chunk";
  json ids = json::array();
  std::string text;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
    EXPECT_FALSE(events[i].contains("usage"));
    ids.push_back(events[i]["choices"][0]["token_ids"][0]);
    text += events[i]["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(events[4]["choices"][0]["finish_reason"], "length");
  // "hello" is five bytes, five tokens.
  EXPECT_EQ(events[4]["usage"],
            json({{"prompt_tokens", 5}, {"completion_tokens", 4}, {"total_tokens", 9}}));
  const json answer = json::parse(whole->body);
  EXPECT_EQ(ids, answer["choices"][0]["token_ids"]);
  EXPECT_EQ(text, answer["choices"][0]["text"]);
  EXPECT_EQ(server.Stop(SIGINT), 0) << server.Err();
}

struct BadRequest {
  std::string body;
  int status;
  std::string param;  // "" for null
  std::string message;
};

TEST(Serve, BadRequestsGetJsonErrorsNamingTheField) {
  Server server("--max-body-bytes 16384 --max-sequence-tokens 64");
  const std::vector<BadRequest> cases = {
      {"{\"prompt\": [1, 2", 400, "", "not valid JSON"},
      {"[1, 2]", 400, "", "JSON object"},
      {"{\"max_tokens\": 3}", 400, "prompt", "required"},
      {"{\"prompt\": 7}", 400, "prompt", "a string or a list"},
      {"{\"prompt\": [1, 101]}", 400, "prompt", "token id 101 outside the vocabulary [0, 101)"},
      {"{\"prompt\": \"\"}", 400, "prompt", "empty"},
      {"{\"prompt\": \"hi\", \"max_tokens\": \"5\"}", 400, "max_tokens", "an integer"},
      {"{\"prompt\": \"hi\", \"max_tokens\": 0}", 400, "max_tokens", "at least 1"},
      {"{\"prompt\": \"hi\", \"stream\": \"yes\"}", 400, "stream", "true or false"},
      // A wrong-typed echo was taken as false; a key twice kept its last value.
      {"{\"prompt\": \"hi\", \"echo\": \"true\"}", 400, "echo", "true or false"},
      {"{\"prompt\": \"hi\", \"max_tokens\": 2, \"max_tokens\": 3}", 400, "",
       "field 'max_tokens': key repeated in its object"},
      {"{\"prompt\": \"hi\", \"temperature\": 0.7}", 400, "temperature", "greedy"},
      {"{\"prompt\": \"hi\", \"model\": \"gpt-4\"}", 404, "model", "does not exist"},
      {"{\"prompt\": \"hi\", \"max_tokens\": 100}", 400, "max_tokens", "64"},
      {"{\"prompt\": \"" + std::string(17000, 'a') + "\"}", 413, "", "--max-body-bytes"},
      // A byte that is not UTF-8: the parser's message quotes it, and the answer is still JSON.
      {"{\"prompt\": \"\xff\"}", 400, "", "not valid JSON"},
      // Above int64: quoted as sent, not wrapped to -1.
      {"{\"prompt\": [18446744073709551615]}", 400, "prompt",
       "token id 18446744073709551615 outside the vocabulary"},
      {"{\"prompt\": [1], \"max_tokens\": 18446744073709551615}", 400, "max_tokens",
       "got 18446744073709551615"},
  };
  for (const BadRequest& c : cases) {
    httplib::Client client("127.0.0.1", server.port());
    const httplib::Result r = client.Post("/v1/completions", c.body, "application/json");
    ASSERT_TRUE(r) << c.body.substr(0, 40);
    EXPECT_EQ(r->status, c.status) << c.body.substr(0, 40) << ": " << r->body;
    const json error = json::parse(r->body)["error"];
    EXPECT_EQ(error["param"], c.param.empty() ? json(nullptr) : json(c.param)) << r->body;
    EXPECT_NE(error["message"].get<std::string>().find(c.message), std::string::npos) << r->body;
    if (c.status == 400) {
      EXPECT_EQ(error["type"], "invalid_request_error");
    }
  }
  EXPECT_EQ(Metric(server.port(), "moelab_requests_total{outcome=\"too_long\"}"), 1);
  httplib::Client client("127.0.0.1", server.port());
  // A chunked body has no declared length: it is bounded as it arrives.
  const std::string chunk(4096, ' ');
  int sent = 0;
  const httplib::Result chunked = client.Post(
      "/v1/completions",
      [&](size_t, httplib::DataSink& sink) {
        if (sent++ < 8) return sink.write(chunk.data(), chunk.size());
        sink.done();
        return true;
      },
      "application/json");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->status, 413) << chunked->body;
  // Within the limit, whatever the content type says (curl -d sends a form's), and a null model.
  const std::string padded =
      "{\"prompt\": [1, 2]," + std::string(9000, ' ') + "\"model\": null, \"max_tokens\": 2}";
  // A second after every request above, so a server's start time is before it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const auto before = std::time(nullptr);
  httplib::Client fresh("127.0.0.1", server.port());
  const httplib::Result form =
      fresh.Post("/v1/completions", padded, "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 200) << form->body;
  // `created` is the request's time, not the server's start.
  EXPECT_GE(json::parse(form->body)["created"].get<int64_t>(), static_cast<int64_t>(before));
  const httplib::Result missing = client.Get("/v2/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_TRUE(json::parse(missing->body).contains("error"));
  EXPECT_EQ(server.Stop(), 0) << server.Err();
}

TEST(Serve, ConcurrentClientsEachGetTheirOwnGreedyTokens) {
  Server server("--max-running 3 --max-batched-tokens 16 --prefill-chunk 8");
  const auto prompts = executor::SyntheticPrompts(6, 11, 101, 9);
  std::vector<json> alone;
  for (const auto& prompt : prompts) {
    const httplib::Result r = Post(server.port(), {{"prompt", prompt}, {"max_tokens", 12}});
    ASSERT_TRUE(r && r->status == 200);
    alone.push_back(json::parse(r->body)["choices"][0]["token_ids"]);
  }
  std::vector<json> together(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      const httplib::Result r =
          Post(server.port(), {{"prompt", prompts[i]}, {"max_tokens", 12}, {"stream", i % 2 == 1}});
      if (!r || r->status != 200) return;
      if (i % 2 == 0) {
        together[i] = json::parse(r->body)["choices"][0]["token_ids"];
        return;
      }
      together[i] = json::array();
      for (const json& event : Events(r->body))
        for (const json& id : event["choices"][0]["token_ids"]) together[i].push_back(id);
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(together, alone);
  EXPECT_EQ(server.Stop(), 0) << server.Err();
}

// Starts a stream of `max_tokens` and reads at least `chunks` chunks of it (and on until `*hold`
// is false), then drops the connection.
void ReadThenDisconnect(int port, int64_t max_tokens, int chunks,
                        const std::atomic<bool>* hold = nullptr) {
  httplib::Client client("127.0.0.1", port);
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body =
      json({{"prompt", "a long answer"}, {"max_tokens", max_tokens}, {"stream", true}}).dump();
  request.set_header("Content-Type", "application/json");
  int seen = 0;
  request.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    return ++seen < chunks || (hold && *hold);
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  client.send(request, response, error);  // fails: the receiver stopped it
  EXPECT_GE(seen, chunks);
}

TEST(Serve, AClientThatDisconnectsFreesItsSequence) {
  Server server("", kSlowShape);
  ReadThenDisconnect(server.port(), 3000, 3);
  EXPECT_TRUE(MetricBecomes(server.port(), "moelab_requests_total{outcome=\"cancelled\"}", 1));
  EXPECT_TRUE(MetricBecomes(server.port(), "moelab_requests_running", 0));
  EXPECT_EQ(Metric(server.port(), "moelab_kv_blocks_used"), 0);
  EXPECT_EQ(Metric(server.port(), "moelab_requests_total{outcome=\"completed\"}"), 0);
  EXPECT_EQ(server.Stop(), 0) << server.Err();
}

// Sends a non-streaming completion request on a raw loopback socket and returns it, so the test
// decides when the client leaves (a client's read timeout raced the server's admission under
// AddressSanitizer: the request could be cancelled before the test ever saw it running).
int SendWholeAnswerRequest(int port, const json& body) {
  const int socket_fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(socket_fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(socket_fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  const std::string payload = body.dump();
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(payload.size()) + "\r\n\r\n" + payload;
  EXPECT_EQ(send(socket_fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  return socket_fd;
}

// A non-streaming answer writes nothing before its end, so the server must look at the
// connection to notice the client left: the sequence is cancelled, not run to max_tokens.
TEST(Serve, AClientThatLeavesAWholeAnswerFreesItsSequence) {
  Server server("", kSlowShape);
  const int socket_fd =
      SendWholeAnswerRequest(server.port(), {{"prompt", "a long answer"}, {"max_tokens", 3000}});
  ASSERT_TRUE(MetricBecomes(server.port(), "moelab_requests_running", 1));
  char byte = 0;
  EXPECT_EQ(recv(socket_fd, &byte, 1, MSG_DONTWAIT), -1)
      << "the answer came before the client left";
  close(socket_fd);
  EXPECT_TRUE(MetricBecomes(server.port(), "moelab_requests_total{outcome=\"cancelled\"}", 1));
  EXPECT_TRUE(MetricBecomes(server.port(), "moelab_requests_running", 0));
  EXPECT_EQ(Metric(server.port(), "moelab_kv_blocks_used"), 0);
  EXPECT_EQ(Metric(server.port(), "moelab_requests_total{outcome=\"completed\"}"), 0);
  EXPECT_EQ(server.Stop(), 0) << server.Err();
}

TEST(Serve, AFullQueueGets503) {
  Server server("--max-running 1 --max-waiting 1", kSlowShape);
  // One request runs (a long stream, held until the end), one waits behind it; the third finds
  // the queue full.
  std::atomic<bool> hold{true};
  std::thread running([&] { ReadThenDisconnect(server.port(), 3000, 2, &hold); });
  ASSERT_TRUE(MetricBecomes(server.port(), "moelab_requests_running", 1));
  std::thread waiting([&] { Post(server.port(), {{"prompt", "wait"}, {"max_tokens", 2}}); });
  ASSERT_TRUE(MetricBecomes(server.port(), "moelab_requests_waiting", 1));
  const httplib::Result r = Post(server.port(), {{"prompt", "too many"}, {"max_tokens", 2}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["message"].is_string(), true);
  hold = false;
  running.join();
  waiting.join();
  EXPECT_EQ(Metric(server.port(), "moelab_requests_total{outcome=\"queue_full\"}"), 1);
  EXPECT_EQ(server.Stop(), 0) << server.Err();
}

TEST(Serve, SigtermFinishesWhatRunsAndExitsZero) {
  Server server("", kSlowShape);
  std::optional<httplib::Result> answer;
  std::thread client([&] {
    answer.emplace(
        Post(server.port(), {{"prompt", "finish me"}, {"max_tokens", 400}, {"stream", true}}));
  });
  ASSERT_TRUE(MetricBecomes(server.port(), "moelab_requests_running", 1));
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Err();
  client.join();
  ASSERT_TRUE(answer && *answer);
  const std::vector<json> events = Events((*answer)->body);
  ASSERT_EQ(events.size(), 401u) << "every token and the last chunk, then [DONE]";
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 400);
}

TEST(Serve, RefusesBadOptionsNamingThem) {
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--port 70000", "--port"},
           {"--kv-blocks 0", "--kv-blocks"},
           {"--queue-order lifo", "--queue-order"},
           {"--max-sequence-tokens 5000", "max_positions"},
           {"--kv-blocks 4 --max-sequence-tokens 2000",
            "--max-sequence-tokens 2000 exceeds the KV budget's 64 tokens"},
           {"--http-threads 0", "--http-threads"},
           // Without a GPU this changed nothing, and the server started.
           {"--gpu 3", "--gpu applies with --device gpu only"},
           // A draft's shape or model without --gamma started a server with no draft.
           {"--draft-layers 2", "--draft-layers applies with --gamma G only"},
           {"--draft qwen2-0.5b", "--draft applies with --gamma G only"}}) {
    const testing::CliRun r = testing::RunMoelab("serve " + kShape + " " + args);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace moelab::cli
