#include "worker/plugin_protocol.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/strict_json.h"
#include "google/protobuf/util/json_util.h"

namespace moetune::worker {
namespace {

using plugin::v1::PluginReply;

// Long garbage is cut in messages: enough to recognise it.
std::string Excerpt(const std::string& payload) {
  constexpr size_t kMax = 80;
  std::string text = payload.substr(0, kMax);
  for (char& c : text) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return payload.size() > kMax ? absl::StrCat(text, "...") : text;
}

const char* KindName(PluginReply::KindCase kind) {
  switch (kind) {
    case PluginReply::kHello:
      return "hello";
    case PluginReply::kProbe:
      return "probe";
    case PluginReply::kRun:
      return "run";
    case PluginReply::kError:
      return "error";
    default:
      return "none";
  }
}

PluginReply::KindCase CaseOf(ReplyKind kind) {
  switch (kind) {
    case ReplyKind::kHello:
      return PluginReply::kHello;
    case ReplyKind::kProbe:
      return PluginReply::kProbe;
    case ReplyKind::kRun:
      return PluginReply::kRun;
  }
  return PluginReply::KIND_NOT_SET;
}

absl::Status ErrorStatus(const plugin::v1::Error& error) {
  const std::string message =
      absl::StrCat("the plugin says: ", error.message());
  if (error.code() == "INVALID_ARGUMENT") {
    return absl::InvalidArgumentError(message);
  }
  if (error.code() == "FAILED_PRECONDITION") {
    return absl::FailedPreconditionError(message);
  }
  if (error.code() == "UNAVAILABLE") return absl::UnavailableError(message);
  return absl::InternalError(message);
}

absl::Status Garbage(absl::string_view why, const std::string& payload) {
  return absl::DataLossError(absl::StrCat(
      "the plugin sent a frame that is not a PluginReply in JSON (", why,
      "): '", Excerpt(payload), "'"));
}

absl::StatusOr<PluginReply> ParseReply(const std::string& payload) {
  if (const absl::Status strict = CheckStrictJson(payload); !strict.ok()) {
    return Garbage(strict.message(), payload);
  }
  PluginReply reply;
  google::protobuf::util::JsonParseOptions options;
  // A plugin may send fields of a later protocol revision; the version
  // says whether the meaning of the known ones changed.
  options.ignore_unknown_fields = true;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(payload, &reply, options);
  if (!parsed.ok()) return Garbage(parsed.ToString(), payload);
  return reply;
}

}  // namespace

std::string EncodePluginRequest(plugin::v1::PluginRequest request) {
  request.set_protocol_version(kPluginProtocolVersion);
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(request, &json, options);
  return json;
}

absl::StatusOr<PluginReply> DecodePluginReply(const std::string& payload,
                                              ReplyKind expected) {
  absl::StatusOr<PluginReply> reply = ParseReply(payload);
  if (!reply.ok()) return reply.status();
  if (reply->protocol_version() != kPluginProtocolVersion) {
    return absl::DataLossError(absl::StrCat(
        "the plugin speaks protocol version ", reply->protocol_version(),
        "; this worker speaks version ", kPluginProtocolVersion));
  }
  if (reply->has_error()) return ErrorStatus(reply->error());
  if (reply->kind_case() != CaseOf(expected)) {
    return absl::DataLossError(absl::StrCat(
        "the plugin answered a ", KindName(CaseOf(expected)),
        " request with a ", KindName(reply->kind_case()), " reply"));
  }
  return reply;
}

absl::StatusOr<std::vector<float>> DecodeRunOutput(
    const plugin::v1::RunReply& run, int batch, int hidden) {
  const auto& shape = run.output_shape();
  if (shape.size() != 2 || shape[0] != batch || shape[1] != hidden) {
    std::string got;
    for (int64_t d : shape) absl::StrAppend(&got, got.empty() ? "" : ", ", d);
    return absl::DataLossError(absl::StrCat("the plugin's output has shape [",
                                            got, "]; the MoE layer's is [",
                                            batch, ", ", hidden, "]"));
  }
  const size_t values = static_cast<size_t>(batch) * hidden;
  if (run.output().size() != values * sizeof(float)) {
    return absl::DataLossError(absl::StrCat(
        "the plugin's output holds ", run.output().size(), " bytes; [", batch,
        ", ", hidden, "] float32 is ", values * sizeof(float)));
  }
  std::vector<float> output(values);
  std::memcpy(output.data(), run.output().data(), run.output().size());
  return output;
}

absl::StatusOr<std::vector<double>> DecodeRunSamples(
    const plugin::v1::RunReply& run, int iterations) {
  if (run.samples_us_size() != iterations) {
    return absl::DataLossError(
        absl::StrCat("the plugin sent ", run.samples_us_size(), " samples for ",
                     iterations, " timed iterations"));
  }
  for (double sample : run.samples_us()) {
    if (!std::isfinite(sample) || sample < 0) {
      return absl::DataLossError(absl::StrCat(
          "the plugin sent a sample of ", sample, " us (need finite, >= 0)"));
    }
  }
  return std::vector<double>(run.samples_us().begin(), run.samples_us().end());
}

}  // namespace moetune::worker
