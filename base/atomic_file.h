#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace moelab::base {

// Writes `path` so that it is either the old file or the whole new one, never a mix:
// - a regular file (or a path that does not exist yet): `write` fills a hidden temporary in the
// same
//   folder (unique per process and call); it is flushed, fsync'ed and closed, each step checked,
//   then renamed over `path` (a symbolic link is followed: the file it names is replaced, the link
//   stays). A kill -9 at any moment leaves the old file or the new whole file, plus at most a
//   hidden `.NAME.tmp.PID.N` temporary.
// - a character device or FIFO (/dev/null, /dev/stdout, a pipe): written in place, never replaced,
//   since renaming over a device would destroy it. Not atomic (a stream has no "old file").
// - anything else (folder, block device, socket): refused.
// Every write, fsync and close is checked; a failure (e.g. a full disk, /dev/full) throws
// moelab::Error naming the path and the system's reason, and leaves no temporary behind. A path
// that names an input of this process is refused when RefuseOutputsOverInputs() is on
// (base/input_file.h).
void WriteFileAtomically(const std::filesystem::path& path,
                         const std::function<void(std::ostream&)>& write);
void WriteFileAtomically(const std::filesystem::path& path, const std::string& text);

// A command's outputs together (its --out and a --trace-out, ...): every regular file is staged in
// a temporary first, then the streams are written, then the temporaries are renamed into place, so
// a file that cannot be written leaves none of the others behind (and no temporary). Only a rename
// failing after others succeeded (a folder made read-only meanwhile) can leave some written.
void WriteFilesAtomically(const std::vector<std::pair<std::filesystem::path, std::string>>& files);

// What WriteFileAtomically would refuse about `path` itself, checked before a command does its
// work (a run of minutes must not end in "cannot write"): a missing or unwritable folder, a
// folder or anything else neither a regular file nor a stream. Throws moelab::Error as it would;
// writes nothing. A stream's own write errors (a full disk, /dev/full) still show only on writing.
void CheckWritableOutput(const std::filesystem::path& path);

// Refuses two outputs of one command that name the same file (through any spelling or link), and
// any that cannot be written (CheckWritableOutput), before anything is written: `outputs` pairs
// an option name with its path; empty paths are skipped.
void RequireWritableDistinctOutputs(
    const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace moelab::base
