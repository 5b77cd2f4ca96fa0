// The tar format as Docker speaks it (build contexts, `docker save` and `docker load` archives):
// a 512-byte ustar header per entry, its data padded to a whole block, two zero blocks at the
// end. Headers are encoded and decoded here; the bytes are moved by the callers. Sizes past the
// 11 octal digits of ustar (8 GiB) use GNU's base-256 form, as Go's archive/tar reads and writes
// it; a PAX extended header's path and size apply to the entry after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool {

inline constexpr size_t kTarBlock = 512;

struct TarEntry {
  std::string name;  // '/'-separated; a directory's ends with '/'
  char type = '0';   // '0' file, '5' directory, '2' symbolic link, 'x'/'g' PAX headers, …
  uint32_t mode = 0644;
  int64_t size = 0;    // bytes of data that follow the header
  int64_t mtime = 0;   // seconds since the epoch
  std::string link{};  // a link's target

  friend bool operator==(const TarEntry&, const TarEntry&) = default;
};

// The header block of `entry`. kInvalidArgument when its name does not fit ustar's 100 bytes
// (or 155 + 100 split at a '/') or its link 100 bytes.
Result<std::string> TarHeader(const TarEntry& entry);
// The zero bytes that pad `size` bytes of data to a whole block.
size_t TarPadding(int64_t size);
// The archive's end: two zero blocks.
std::string TarEnd();

// One header block: the entry, or nullopt for a zero block (the archive's end). kInvalidArgument
// for a block whose checksum is wrong or whose numbers are not numbers.
Result<std::optional<TarEntry>> ParseTarHeader(std::string_view block);
// The records of a PAX extended header's data ("<length> <key>=<value>\n"…) applied to the entry
// that follows it: "path" replaces its name, "size" its size. kInvalidArgument when malformed.
Status ApplyPaxRecords(std::string_view data, TarEntry& next);

}  // namespace gpupool
