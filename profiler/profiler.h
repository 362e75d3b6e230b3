#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "executor/executor_config.h"
#include "model/executor_shape.h"
#include "model/preset_store.h"
#include "profiler/profile_grid.h"

namespace moelab::profiler {

// What to profile: the model being planned (a preset or file plus shape overrides, as `moelab
// run` takes them) and its draft (for dense_ffn), how hard, and where.
struct ProfileRequest {
  std::string model = "mixtral-8x7b";
  model::ShapeOverrides shape = model::DefaultTargetShape();
  std::string draft = "llama-3.2-1b";
  model::ShapeOverrides draft_shape =
      model::DefaultDraftShape();  // an unset vocab takes the target's
  bool quick = false;
  // The target's weight formats as the executor stores them (moelab run's --expert-bits and
  // --attention-bits: 16 bf16, 8 q8_0, 4 q4_0): expert_ffn and attention are measured on them and
  // the profile's model.shape records them, so a fit prices the bytes the executor reads.
  int expert_bits = 16;
  int attention_bits = 16;
  std::optional<GridSpec> grid;       // unset: GridSpec::Quick() when quick, else GridSpec::Full()
  int threads = 0;                    // thread pool size; 0: DefaultThreadCount()
  std::filesystem::path storage_dir;  // storage_read's temporary file; empty: the temp folder
  bool storage_direct_io = true;      // false: buffered reads (what a refusing filesystem gets)
  // The last-level cache that weights are cycled past and the evictor reads twice over (profile
  // --cache-bytes); unset: EffectiveCacheBytes of the reported L3. A virtual machine can report
  // the whole host socket's L3 (508 MiB on a 2-vCPU EPYC guest), and every family's buffers are
  // then 2 x that: first touching them is most of a profile's time there.
  std::optional<int64_t> cache_bytes;
  bool use_gpu = true;        // measure GPU 0 when DetectGpus() finds one
  bool cpu_operators = true;  // false: only the GPU's operators (validate --device gpu)
  // false: no operator is measured (the machine and its limits are; `profile --collectives
  // --no-operators`: a profile of the collectives alone).
  bool operators = true;
  uint64_t seed = 1;                 // synthetic attention weights
  std::ostream* progress = nullptr;  // "[12/85] expert_ffn cpu tokens=64: median 3.10 ms" lines
  // Called after each of the grid's rounds (round 1..rounds), before the ridge points and the
  // limits: a caller's own measurements interleaved with the profile's see the same machine
  // (validate runs its case rounds here). It must not start another profile.
  std::function<void(int round, int rounds)> after_round;

  void Validate() const;  // throws moelab::Error naming the field
};

// Refuses (moelab::Error naming --cache-bytes) a cache outside 1 MiB .. 64 GiB.
void CheckCacheBytesOption(int64_t cache_bytes);

// Measures every operator of the grid with Google Benchmark and returns the "moelab.profile/1"
// document (profiler/README.md): machine, model, draft, grid, samples, notes, wall_time_s. The
// caller adds "provenance". Bad input (unknown model, impossible shape, bad grid) throws
// moelab::Error before anything runs; a family that cannot be prepared (memory, files, GPU) is
// skipped with a note; a point that fails is left out with a note. Uses Google Benchmark's global
// registry: one profile at a time per process (serialized by a lock).
nlohmann::json RunProfile(const ProfileRequest& request, const model::PresetStore& presets);

// The target as the executor runs it for `request` (the model with its shape overrides and weight
// formats): what the grid is made from. Throws moelab::Error for an unknown model or bad shape.
executor::ExecutorConfig ProfiledTargetConfig(const ProfileRequest& request,
                                              const model::PresetStore& presets);

// The schema a profile document names (and ValidateProfile requires).
inline constexpr const char* kProfileSchema = "moelab.profile/1";

// Throws moelab::Error naming the first field of `profile` that does not follow moelab.profile/1
// (profile_file.cc, with RequireOutputFolder and WriteProfile).
void ValidateProfile(const nlohmann::json& profile);

// Throws moelab::Error when the folder `out` would be written to does not exist (checked before
// a profile starts, so a long run never ends in a failed write).
void RequireOutputFolder(const std::filesystem::path& out);

// Validates `profile` and writes it to `out` atomically (base/atomic_file.h): a failure leaves no
// file behind.
void WriteProfile(const nlohmann::json& profile, const std::filesystem::path& out);

}  // namespace moelab::profiler
