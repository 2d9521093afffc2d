// The worker's side of the out-of-process backend protocol
// (proto/plugin.proto, docs/plugins.md): requests written as protobuf JSON
// frame payloads, and replies read back and checked (the protocol version,
// the kind of reply, an Error turned into a status, the output's shape).
// Whatever a plugin sends, these return a status naming what was wrong;
// they never abort. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plugin.pb.h"

namespace moetune::worker {

// The protocol version this worker speaks.
inline constexpr uint32_t kPluginProtocolVersion = 1;

// The request as a frame payload (protobuf JSON, proto field names), with
// protocol_version set.
std::string EncodePluginRequest(plugin::v1::PluginRequest request);

// The kind of reply a request expects.
enum class ReplyKind { kHello, kProbe, kRun };

// The reply of kind `expected` in `payload`. DATA_LOSS when the plugin
// broke the protocol: a payload that is not a PluginReply in JSON
// ("garbage"), another protocol version, another kind of reply. An Error
// reply is the status of its code (INVALID_ARGUMENT, FAILED_PRECONDITION,
// UNAVAILABLE; INTERNAL for any other) with its message.
absl::StatusOr<plugin::v1::PluginReply> DecodePluginReply(
    const std::string& payload, ReplyKind expected);

// A run reply's output as floats: DATA_LOSS unless output_shape is {batch,
// hidden} and output holds batch * hidden float32 values.
absl::StatusOr<std::vector<float>> DecodeRunOutput(
    const plugin::v1::RunReply& run, int batch, int hidden);

// The run reply's samples: DATA_LOSS unless there are `iterations` of them,
// each finite and >= 0.
absl::StatusOr<std::vector<double>> DecodeRunSamples(
    const plugin::v1::RunReply& run, int iterations);

}  // namespace moetune::worker
