#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"

namespace moelab::sim {
namespace {

TEST(EventQueue, PopsInTimeOrderWithTiesInPushOrder) {
  EventQueue queue;
  std::mt19937_64 random(7);
  std::vector<std::pair<double, int64_t>> pushed;
  for (int64_t id = 0; id < 2000; ++id) {
    const double time_s = static_cast<double>(random() % 50) * 0.25;  // many equal times
    queue.Push(time_s, id);
    pushed.push_back({time_s, id});
  }
  std::stable_sort(pushed.begin(), pushed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [time_s, id] : pushed) {
    ASSERT_FALSE(queue.empty());
    const EventQueue::Event event = queue.Pop();
    EXPECT_EQ(event.time_s, time_s);
    EXPECT_EQ(event.id, id);
    EXPECT_EQ(queue.now_s(), time_s);
  }
  EXPECT_TRUE(queue.empty());
}

TEST(EventQueue, EventsPushedWhileRunningKeepTheOrder) {
  EventQueue queue;
  queue.Push(1.0, 1);
  queue.Push(3.0, 3);
  EXPECT_EQ(queue.Pop().id, 1);
  queue.Push(1.0, 10);  // same instant as now: allowed, after everything earlier
  queue.Push(2.0, 2);
  EXPECT_EQ(queue.Pop().id, 10);
  EXPECT_EQ(queue.Pop().id, 2);
  EXPECT_EQ(queue.Pop().id, 3);
  EXPECT_EQ(queue.pushed(), 4u);
}

#ifdef NDEBUG
TEST(EventQueue, TimeNeverGoesBackwards) {
  EventQueue queue;
  queue.Push(2.0, 0);
  queue.Pop();
  EXPECT_THROW(queue.Push(1.999, 1), base::Error);
  EXPECT_THROW(queue.Push(std::nan(""), 1), base::Error);
  EXPECT_THROW(queue.Push(std::numeric_limits<double>::infinity(), 1), base::Error);
  EXPECT_EQ(queue.now_s(), 2.0);
}
#endif

}  // namespace
}  // namespace moelab::sim
