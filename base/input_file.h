#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace moelab::base {

// Size caps for files read whole into memory. A parsed JSON document takes roughly 10-20x its text
// in memory (every number becomes a 16-byte node plus container overhead), so 256 MiB of JSON is
// already several GiB; CSV tables of measurements are a few thousand rows at most.
inline constexpr uint64_t kMaxJsonFileBytes = 256ull << 20;
inline constexpr uint64_t kMaxCsvFileBytes = 64ull << 20;

// Refuses, before anything opens it, a path that is missing or is not a regular file (a FIFO would
// block forever, a device never ends, a folder cannot be read). `what` names the role, e.g.
// "measurements file". Returns the file's size in bytes.
uint64_t RequireRegularFile(const std::filesystem::path& file, std::string_view what);

// Reads a whole regular file of at most `max_bytes` (the message states the cap and why); every
// read is checked. Records the file as an input of this process (see IsInputOfThisProcess).
std::string ReadInputFile(const std::filesystem::path& file, uint64_t max_bytes,
                          std::string_view what);

// Inputs read so far by this process, so that an output never overwrites one: once the moelab
// binary calls RefuseOutputsOverInputs(), WriteFileAtomically refuses a path that names (through
// any spelling or link) a file this process has read. Off by default so that libraries and their
// tests may rewrite a file they read. Files opened without ReadInputFile (memory-mapped weights)
// are recorded with NoteInputFile.
void RefuseOutputsOverInputs();
void NoteInputFile(const std::filesystem::path& file);
bool IsGuardedInput(const std::filesystem::path& file);

}  // namespace moelab::base
