#pragma once
// A file written whole or not at all: the bytes go to path.tmp, are flushed to disk
// (fsync) and renamed over path, so a reader never sees a partial file and an existing one
// is replaced only by a complete successor.
#include <string>

namespace strata {

// Throws IoError naming the file and the system's reason when any step fails (the
// temporary file is removed; an existing file at path is untouched).
void write_file_atomically(const std::string& path, const void* data, size_t bytes);

}  // namespace strata
