// Output paths proved writable before any work starts: a run whose first save, log line or profile
// can only fail should fail at start, not after hours of training (issue 22, item 5).
#pragma once

#include <string>

namespace ds {

// Creates `dir` (and missing parents) and proves it takes new files by creating and removing a
// probe file in it — the only check that holds for root, read-only mounts and immutable folders.
// Returns "" when it does, else why not, e.g. "/a/b is a file, not a directory" or "cannot create
// files in it: Read-only file system".
std::string writable_dir_problem(const std::string& dir);

// The same for a file about to be written: its directory is writable (created if missing) and the
// file, when it exists, is a regular file that opens for writing (it is not modified).
std::string writable_file_problem(const std::string& file);

}  // namespace ds
