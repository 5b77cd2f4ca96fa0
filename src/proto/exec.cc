// The frames of `gpupool exec` (see exec.h).
#include "proto/exec.h"

namespace gpupool::proto {

std::string EncodeExecFrame(ExecChannel channel, std::string_view payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  std::string frame;
  frame.reserve(kExecFrameHeader + payload.size());
  frame.push_back(static_cast<char>(channel));
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(n >> shift));
  frame.append(payload);
  return frame;
}

std::optional<Result<ExecFrame>> ExecFrameReader::Next() {
  if (buffer_.size() - offset_ < kExecFrameHeader) return std::nullopt;
  const auto* header = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  if (header[0] > static_cast<unsigned char>(ExecChannel::kStart)) {
    return InvalidArgument("exec frame: unknown channel " + std::to_string(header[0]));
  }
  uint32_t n = 0;
  for (size_t i = 1; i < kExecFrameHeader; ++i) n = (n << 8) | header[i];
  if (n > kMaxExecPayload) {
    return InvalidArgument("exec frame: a payload of " + std::to_string(n) +
                           " bytes is over the limit of " + std::to_string(kMaxExecPayload));
  }
  if (buffer_.size() - offset_ - kExecFrameHeader < n) return std::nullopt;
  ExecFrame frame{static_cast<ExecChannel>(header[0]),
                  buffer_.substr(offset_ + kExecFrameHeader, n)};
  offset_ += kExecFrameHeader + n;
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  } else if (offset_ > (1 << 16) && offset_ > buffer_.size() / 2) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  return frame;
}

}  // namespace gpupool::proto
