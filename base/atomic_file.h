#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

namespace moelab {

// Writes `path` atomically: `write` fills a hidden temporary file in the same folder (unique per
// process and call), which is then renamed over `path`, so readers never see a partial file and a
// failure leaves nothing behind. Throws moelab::Error naming the path.
void WriteFileAtomically(const std::filesystem::path& path,
                         const std::function<void(std::ostream&)>& write);
void WriteFileAtomically(const std::filesystem::path& path, const std::string& text);

}  // namespace moelab
