#include "loadgen/load_generator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/limits.h"

namespace moelab::loadgen {
namespace {

// The scheduler's hand-off to the workers: request indices due now, and how many workers are free.
struct Dispatch {
  std::mutex mutex;
  std::condition_variable work_ready, worker_free;
  std::deque<size_t> due;
  int64_t idle_workers = 0;
  bool all_released = false;
  std::atomic<int64_t> sent{0}, finished{0}, failed{0};
};

void Worker(Dispatch& dispatch, const LoadgenOptions& options,
            const std::vector<serving::RequestSpec>& requests, Clock::time_point start,
            std::vector<serving::RequestOutcome>& outcomes, std::vector<double>& send_lateness_s) {
  for (;;) {
    size_t index = 0;
    {
      std::unique_lock<std::mutex> lock(dispatch.mutex);
      dispatch.work_ready.wait(lock,
                               [&] { return !dispatch.due.empty() || dispatch.all_released; });
      if (dispatch.due.empty()) return;
      index = dispatch.due.front();
      dispatch.due.pop_front();
    }
    send_lateness_s[index] =
        std::chrono::duration<double>(Clock::now() - start).count() - requests[index].arrival_s;
    dispatch.sent.fetch_add(1);
    outcomes[index] = SendCompletion(options.completion, requests[index], start);
    dispatch.finished.fetch_add(1);
    if (outcomes[index].failed) dispatch.failed.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(dispatch.mutex);
      ++dispatch.idle_workers;
    }
    dispatch.worker_free.notify_one();
  }
}

// Releases each request at its arrival time; one due while every worker is busy waits for the
// first free one and counts as a late send.
int64_t Schedule(Dispatch& dispatch, const std::vector<serving::RequestSpec>& requests,
                 Clock::time_point start) {
  int64_t late_sends = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(start +
                                  std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(requests[i].arrival_s)));
    std::unique_lock<std::mutex> lock(dispatch.mutex);
    if (dispatch.idle_workers == 0) {
      ++late_sends;
      dispatch.worker_free.wait(lock, [&] { return dispatch.idle_workers > 0; });
    }
    --dispatch.idle_workers;
    dispatch.due.push_back(i);
    lock.unlock();
    dispatch.work_ready.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(dispatch.mutex);
    dispatch.all_released = true;
  }
  dispatch.work_ready.notify_all();
  return late_sends;
}

// "loadgen: sent 120/500, in flight 14, done 106 (failed 0), 12.0 s", rewritten in place.
void Progress(Dispatch& dispatch, size_t total, Clock::time_point start, std::atomic<bool>& stop) {
  while (!stop.load()) {
    const int64_t sent = dispatch.sent.load(), finished = dispatch.finished.load();
    std::fprintf(stderr,
                 "\rloadgen: sent %lld/%zu, in flight %lld, done %lld (failed %lld), %.1f s ",
                 static_cast<long long>(sent), total, static_cast<long long>(sent - finished),
                 static_cast<long long>(finished), static_cast<long long>(dispatch.failed.load()),
                 std::chrono::duration<double>(Clock::now() - start).count());
    std::fflush(stderr);
    for (int i = 0; i < 5 && !stop.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fprintf(stderr, "\n");
}

}  // namespace

void LoadgenOptions::Validate() const {
  base::CheckCount(concurrency_max, 1, kMaxConcurrency, "--concurrency-max",
                   "each request in flight is a thread with its own connection");
  base::CheckCount(completion.vocab, 2, kMaxVocab, "--vocab",
                   "token ids 1..V-1; released vocabularies have about 260,000 entries");
  base::CheckSeconds(completion.timeout_s, "--timeout");
  if (completion.timeout_s <= 0) throw base::Error("--timeout must be above 0 s");
  if (completion.model && completion.model->empty())
    throw base::Error("--model: an empty name (leave the option out to send no model)");
}

LoadgenResult RunLoad(const LoadgenOptions& options,
                      const std::vector<serving::RequestSpec>& requests) {
  options.Validate();
  LoadgenResult result;
  result.outcomes.resize(requests.size());
  std::vector<double> send_lateness_s(requests.size(), 0);
  Dispatch dispatch;
  const int64_t workers =
      std::min<int64_t>(options.concurrency_max, static_cast<int64_t>(requests.size()));
  dispatch.idle_workers = workers;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers));
  for (int64_t i = 0; i < workers; ++i) {
    pool.emplace_back(Worker, std::ref(dispatch), std::cref(options), std::cref(requests), start,
                      std::ref(result.outcomes), std::ref(send_lateness_s));
  }
  std::atomic<bool> stop_progress{false};
  std::thread progress;
  if (options.progress) {
    progress =
        std::thread(Progress, std::ref(dispatch), requests.size(), start, std::ref(stop_progress));
  }
  result.late_sends = Schedule(dispatch, requests, start);
  for (std::thread& worker : pool) worker.join();
  stop_progress = true;
  if (progress.joinable()) progress.join();
  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (const double lateness_s : send_lateness_s)
    result.max_send_lateness_s = std::max(result.max_send_lateness_s, lateness_s);
  return result;
}

}  // namespace moelab::loadgen
