// Tests for api/tunnel_frame: every frame type round-trips, and each malformed frame is refused
// with its reason.
#include "api/tunnel_frame.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool::api::tunnel {
namespace {

TEST(TunnelFrameTest, RoundTripsEveryType) {
  const FrameType types[] = {FrameType::kOpen, FrameType::kRefused, FrameType::kData,
                             FrameType::kReset};
  for (FrameType type : types) {
    const std::string payload = type == FrameType::kData ? std::string("\0\xff bytes", 8) : "why";
    const std::string message = EncodeFrame(type, 0x01020304, payload);
    EXPECT_EQ(message.size(), kFrameHeaderBytes + payload.size());
    EXPECT_EQ(message[1], '\x01');  // big-endian stream id
    EXPECT_EQ(message[4], '\x04');
    Result<Frame> frame = DecodeFrame(message);
    ASSERT_TRUE(frame) << frame.error().message;
    EXPECT_EQ(frame->type, type);
    EXPECT_EQ(frame->stream, 0x01020304u);
    EXPECT_EQ(frame->payload, payload);
  }
  for (FrameType type : {FrameType::kOpened, FrameType::kEnd}) {
    Result<Frame> frame = DecodeFrame(EncodeFrame(type, 7));
    ASSERT_TRUE(frame) << frame.error().message;
    EXPECT_EQ(frame->type, type);
  }
  Result<Frame> window = DecodeFrame(EncodeWindow(9, 0x80000001u));
  ASSERT_TRUE(window) << window.error().message;
  EXPECT_EQ(window->type, FrameType::kWindow);
  EXPECT_EQ(WindowIncrement(*window), 0x80000001u);
}

TEST(TunnelFrameTest, RefusesMalformedFrames) {
  struct Row {
    std::string message;
    std::string error;
  };
  const Row rows[] = {
      {"", "shorter than its 5-byte header"},
      {std::string("\x04\0\0\0", 4), "shorter than its 5-byte header"},
      {EncodeFrame(static_cast<FrameType>(0), 1), "unknown type 0"},
      {EncodeFrame(static_cast<FrameType>(8), 1), "unknown type 8"},
      {EncodeFrame(FrameType::kData, 0, "x"), "DATA frame on stream 0"},
      {EncodeFrame(FrameType::kData, 1, std::string(kMaxDataPayload + 1, 'x')),
       "DATA frame's payload of 65537 bytes exceeds 65536"},
      {EncodeFrame(FrameType::kReset, 1, std::string(kMaxControlPayload + 1, 'x')),
       "exceeds 16384"},
      {EncodeFrame(FrameType::kWindow, 1, "abc"), "must be 4 bytes, not 3"},
      {EncodeWindow(1, 0), "grants 0 bytes"},
      {EncodeFrame(FrameType::kEnd, 1, "x"), "END frame carries no payload"},
      {EncodeFrame(FrameType::kOpened, 1, "x"), "OPENED frame carries no payload"},
  };
  for (const Row& row : rows) {
    Result<Frame> frame = DecodeFrame(row.message);
    ASSERT_FALSE(frame) << row.error;
    EXPECT_EQ(frame.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(frame.error().message.find(row.error), std::string::npos) << frame.error().message;
  }
  // The largest DATA payload is accepted.
  EXPECT_TRUE(DecodeFrame(EncodeFrame(FrameType::kData, 1, std::string(kMaxDataPayload, 'x'))));
}

}  // namespace
}  // namespace gpupool::api::tunnel
