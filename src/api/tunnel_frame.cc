// The tunnel's frame encoding (see tunnel_frame.h): a fixed 5-byte header, then the payload.
#include "api/tunnel_frame.h"

namespace gpupool::api::tunnel {
namespace {

void PutU32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

uint32_t GetU32(std::string_view in) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(in[0])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(in[1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(in[2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(in[3]));
}

}  // namespace

std::string_view FrameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kOpen:
      return "OPEN";
    case FrameType::kOpened:
      return "OPENED";
    case FrameType::kRefused:
      return "REFUSED";
    case FrameType::kData:
      return "DATA";
    case FrameType::kWindow:
      return "WINDOW";
    case FrameType::kEnd:
      return "END";
    case FrameType::kReset:
      return "RESET";
  }
  return "UNKNOWN";
}

std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload) {
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  out.push_back(static_cast<char>(type));
  PutU32(out, stream);
  out.append(payload);
  return out;
}

std::string EncodeWindow(uint32_t stream, uint32_t bytes) {
  std::string payload;
  PutU32(payload, bytes);
  return EncodeFrame(FrameType::kWindow, stream, payload);
}

Result<Frame> DecodeFrame(std::string_view message) {
  if (message.size() < kFrameHeaderBytes) {
    return InvalidArgument("tunnel frame of " + std::to_string(message.size()) +
                           " bytes is shorter than its " + std::to_string(kFrameHeaderBytes) +
                           "-byte header");
  }
  const auto raw_type = static_cast<uint8_t>(message[0]);
  if (raw_type < static_cast<uint8_t>(FrameType::kOpen) ||
      raw_type > static_cast<uint8_t>(FrameType::kReset)) {
    return InvalidArgument("tunnel frame has unknown type " + std::to_string(raw_type));
  }
  Frame frame;
  frame.type = static_cast<FrameType>(raw_type);
  frame.stream = GetU32(message.substr(1, 4));
  const std::string_view payload = message.substr(kFrameHeaderBytes);
  const std::string name(FrameTypeName(frame.type));
  if (frame.stream == 0) return InvalidArgument("tunnel " + name + " frame on stream 0");
  const size_t limit = frame.type == FrameType::kData ? kMaxDataPayload : kMaxControlPayload;
  if (payload.size() > limit) {
    return InvalidArgument("tunnel " + name + " frame's payload of " +
                           std::to_string(payload.size()) + " bytes exceeds " +
                           std::to_string(limit));
  }
  if (frame.type == FrameType::kWindow) {
    if (payload.size() != 4) {
      return InvalidArgument("tunnel WINDOW frame's payload must be 4 bytes, not " +
                             std::to_string(payload.size()));
    }
    if (GetU32(payload) == 0) return InvalidArgument("tunnel WINDOW frame grants 0 bytes");
  }
  if ((frame.type == FrameType::kOpened || frame.type == FrameType::kEnd) && !payload.empty()) {
    return InvalidArgument("tunnel " + name + " frame carries no payload");
  }
  frame.payload = std::string(payload);
  return frame;
}

uint32_t WindowIncrement(const Frame& window) { return GetU32(window.payload); }

}  // namespace gpupool::api::tunnel
