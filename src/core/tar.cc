#include "core/tar.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>

namespace gpupool {
namespace {

constexpr size_t kNameBytes = 100;
constexpr size_t kPrefixBytes = 155;

// `value` in octal, `width` - 1 digits and a NUL; a size too large for them in base-256.
void PutNumber(char* field, size_t width, int64_t value) {
  const uint64_t v = static_cast<uint64_t>(value);
  if (value >= 0 && v < (uint64_t{1} << ((width - 1) * 3))) {  // widths 8 and 12: 21 or 33 bits
    for (size_t i = width - 1; i-- > 0;) {
      field[i] = static_cast<char>('0' + ((v >> (3 * (width - 2 - i))) & 7));
    }
    field[width - 1] = '\0';
    return;
  }
  field[0] = static_cast<char>(0x80);  // base-256, big-endian
  for (size_t i = 1; i < width; ++i) {
    const size_t shift = 8 * (width - 1 - i);
    field[i] = static_cast<char>(shift >= 64 ? 0 : (v >> shift) & 0xff);
  }
}

std::optional<int64_t> GetNumber(std::string_view field) {
  if (!field.empty() && (static_cast<unsigned char>(field[0]) & 0x80) != 0) {
    uint64_t v = static_cast<unsigned char>(field[0]) & 0x7f;
    for (size_t i = 1; i < field.size(); ++i) {
      if (v >> 55) return std::nullopt;  // past 63 bits
      v = (v << 8) | static_cast<unsigned char>(field[i]);
    }
    return static_cast<int64_t>(v);
  }
  int64_t v = 0;
  bool digits = false;
  for (char c : field) {
    if (c == '\0' || (c == ' ' && digits)) break;
    if (c == ' ') continue;
    if (c < '0' || c > '7' || v > (INT64_MAX >> 3)) return std::nullopt;
    v = v * 8 + (c - '0');
    digits = true;
  }
  return v;
}

std::string Field(std::string_view block, size_t at, size_t width) {
  const std::string_view f = block.substr(at, width);
  return std::string(f.substr(0, f.find('\0')));
}

unsigned Checksum(const char* h) {
  unsigned sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  }
  return sum;
}

}  // namespace

Result<std::string> TarHeader(const TarEntry& entry) {
  std::string name = entry.name;
  std::string prefix;
  if (name.size() > kNameBytes) {
    // Split at a '/' so that the prefix takes at most 155 bytes and the name at most 100.
    const size_t from = name.size() - kNameBytes - 1;
    const size_t slash = name.find('/', from);
    if (slash == std::string::npos || slash > kPrefixBytes || slash == 0) {
      return InvalidArgument("tar entry name '" + entry.name.substr(0, 80) +
                             "…' is too long for a ustar header");
    }
    prefix = name.substr(0, slash);
    name = name.substr(slash + 1);
  }
  if (entry.link.size() > kNameBytes) {
    return InvalidArgument("tar link target of '" + entry.name + "' is too long");
  }
  std::string h(kTarBlock, '\0');
  std::memcpy(h.data(), name.data(), name.size());
  PutNumber(h.data() + 100, 8, entry.mode);
  PutNumber(h.data() + 108, 8, 0);  // uid
  PutNumber(h.data() + 116, 8, 0);  // gid
  PutNumber(h.data() + 124, 12, entry.size);
  PutNumber(h.data() + 136, 12, entry.mtime);
  h[156] = entry.type;
  std::memcpy(h.data() + 157, entry.link.data(), entry.link.size());
  std::memcpy(h.data() + 257, "ustar", 6);
  std::memcpy(h.data() + 263, "00", 2);
  std::memcpy(h.data() + 345, prefix.data(), prefix.size());
  std::snprintf(h.data() + 148, 8, "%06o", Checksum(h.data()));
  h[155] = ' ';
  return h;
}

size_t TarPadding(int64_t size) {
  return static_cast<size_t>((kTarBlock - static_cast<uint64_t>(size) % kTarBlock) % kTarBlock);
}

std::string TarEnd() { return std::string(2 * kTarBlock, '\0'); }

Result<std::optional<TarEntry>> ParseTarHeader(std::string_view block) {
  if (block.size() != kTarBlock) return InvalidArgument("a tar header is 512 bytes");
  if (block.find_first_not_of('\0') == std::string_view::npos) return std::optional<TarEntry>();
  const std::optional<int64_t> sum = GetNumber(block.substr(148, 8));
  if (!sum || *sum != Checksum(block.data())) {
    return InvalidArgument("tar header has a wrong checksum (not a tar archive, or damaged)");
  }
  TarEntry e;
  e.name = Field(block, 0, kNameBytes);
  if (block.substr(257, 5) == "ustar") {
    if (const std::string prefix = Field(block, 345, kPrefixBytes); !prefix.empty()) {
      e.name = prefix + "/" + e.name;
    }
  }
  e.type = block[156] == '\0' ? '0' : block[156];
  e.link = Field(block, 157, kNameBytes);
  const std::optional<int64_t> mode = GetNumber(block.substr(100, 8));
  const std::optional<int64_t> size = GetNumber(block.substr(124, 12));
  const std::optional<int64_t> mtime = GetNumber(block.substr(136, 12));
  if (!mode || !size || !mtime) {
    return InvalidArgument("tar header of '" + e.name + "' has a malformed number");
  }
  e.mode = static_cast<uint32_t>(*mode & 07777);
  e.size = *size;
  e.mtime = *mtime;
  return std::optional<TarEntry>(std::move(e));
}

Status ApplyPaxRecords(std::string_view data, TarEntry& next) {
  while (!data.empty()) {
    const size_t space = data.find(' ');
    if (space == std::string_view::npos || space == 0) {
      return InvalidArgument("malformed PAX record");
    }
    size_t length = 0;
    for (char c : data.substr(0, space)) {
      if (c < '0' || c > '9' || length > data.size()) {
        return InvalidArgument("malformed PAX record length");
      }
      length = length * 10 + static_cast<size_t>(c - '0');
    }
    if (length <= space + 1 || length > data.size() || data[length - 1] != '\n') {
      return InvalidArgument("malformed PAX record");
    }
    const std::string_view record = data.substr(space + 1, length - space - 2);
    data.remove_prefix(length);
    const size_t eq = record.find('=');
    if (eq == std::string_view::npos) return InvalidArgument("malformed PAX record: no '='");
    const std::string_view key = record.substr(0, eq);
    const std::string_view value = record.substr(eq + 1);
    if (key == "path") {
      next.name = std::string(value);
    } else if (key == "size") {
      int64_t size = 0;
      for (char c : value) {
        if (c < '0' || c > '9' || size > INT64_MAX / 10 - 9) {
          return InvalidArgument("malformed PAX size '" + std::string(value) + "'");
        }
        size = size * 10 + (c - '0');
      }
      if (value.empty()) return InvalidArgument("malformed PAX size ''");
      next.size = size;
    }
  }
  return {};
}

}  // namespace gpupool
