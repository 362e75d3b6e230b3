#include "executor/offload/expert_reader.h"

#include "base/error.h"
#include "executor/offload/thread_reader.h"
#ifdef MOELAB_HAVE_LIBURING
#include "executor/offload/io_uring_reader.h"
#endif

namespace moelab::executor::offload {

std::string ToString(ReaderKind kind) {
  switch (kind) {
    case ReaderKind::kThreads:
      return "threads";
    case ReaderKind::kIoUring:
      return "io_uring";
  }
  return "?";
}

ReaderKind ParseReaderKind(const std::string& name) {
  if (name == "threads") return ReaderKind::kThreads;
  if (name == "io_uring") return ReaderKind::kIoUring;
  throw base::Error("--offload-reader: expected threads or io_uring, got '" + name + "'");
}

bool IoUringAvailable(std::string* why) {
#ifdef MOELAB_HAVE_LIBURING
  return IoUringExpertReader::Available(why);
#else
  if (why) *why = "this build has no liburing (install liburing-dev and rebuild)";
  return false;
#endif
}

std::unique_ptr<ExpertReader> MakeExpertReader(ReaderKind kind, const ExpertStore& store,
                                               int in_flight, ExecutionTimeline* timeline) {
  switch (kind) {
    case ReaderKind::kThreads:
      return std::make_unique<ThreadExpertReader>(store, in_flight, timeline);
    case ReaderKind::kIoUring: {
#ifdef MOELAB_HAVE_LIBURING
      return std::make_unique<IoUringExpertReader>(store, in_flight, timeline);
#else
      std::string why;
      IoUringAvailable(&why);
      throw base::Error("--offload-reader io_uring: " + why + " (use --offload-reader threads)");
#endif
    }
  }
  throw base::Error("offload: unknown reader kind");
}

}  // namespace moelab::executor::offload
