// Reading a whole file the caller names (a config, a checkpoint, an image), bounded: only regular
// files are read (a FIFO would block forever, /dev/zero never ends), and never more than a limit.
#pragma once

#include <cstdint>
#include <string>

namespace tinyfuse {

// The bytes of the regular file at `path`. Throws Error, with a message starting with `what`
// ("config file \"run.json\""), when it cannot be opened or read, when it is not a regular file
// (a directory, FIFO, socket or device; it is not read at all then), or when it holds more than
// `max_bytes` bytes; `limit` names that bound in the message ("kMaxConfigFileBytes").
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what,
                              const std::string& limit);

}  // namespace tinyfuse
