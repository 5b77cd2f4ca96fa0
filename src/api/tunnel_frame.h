// The tunnel's frames (docs/api.md "The tunnel"): what one WebSocket message between the server
// and a node's agent carries — a stream id, a type and a payload — encoded and decoded here, with
// no I/O. Many streams share one connection; a stream's bytes flow only as far as the receiver's
// credit (WINDOW) allows, so one slow stream never stalls the others.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool::api::tunnel {

enum class FrameType : uint8_t {
  kOpen = 1,     // server -> agent: open a stream; payload: proto::TunnelOpen as JSON
  kOpened = 2,   // agent -> server: the stream's target is reached; payload empty
  kRefused = 3,  // agent -> server: it is not; payload: the reason (UTF-8)
  kData = 4,     // bytes of the stream, within the receiver's credit
  kWindow = 5,   // more credit: payload a 4-byte big-endian byte count
  kEnd = 6,      // the sender sends no more (half-close); payload empty
  kReset = 7,    // the stream is aborted; payload: the reason (UTF-8)
};

// The name of a type, for errors and logs ("DATA").
std::string_view FrameTypeName(FrameType type);

struct Frame {
  FrameType type = FrameType::kData;
  uint32_t stream = 0;  // never 0
  std::string payload;
};

// Bytes before the payload: the type (1 byte), then the stream id (4 bytes, big-endian).
inline constexpr size_t kFrameHeaderBytes = 5;
// The largest DATA payload a sender puts in one frame, and what a receiver accepts.
inline constexpr size_t kMaxDataPayload = 64 * 1024;
// The largest payload of any other frame (an OPEN's JSON, a reason).
inline constexpr size_t kMaxControlPayload = 16 * 1024;

std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload = {});
// A WINDOW frame granting `bytes` more.
std::string EncodeWindow(uint32_t stream, uint32_t bytes);

// One message as a frame. kInvalidArgument naming what is wrong: too short, an unknown type, a
// payload too large for its type, stream 0, a WINDOW that is not 4 bytes or grants 0, a payload
// on OPENED or END.
Result<Frame> DecodeFrame(std::string_view message);
// The credit a decoded WINDOW frame grants.
uint32_t WindowIncrement(const Frame& window);

}  // namespace gpupool::api::tunnel
