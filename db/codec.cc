#include "db/codec.h"

#include <bit>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace moetune::db {

std::string EncodeSamples(std::span<const double> samples) {
  std::string blob;
  blob.reserve(samples.size() * 8);
  for (const double sample : samples) {
    const uint64_t bits = std::bit_cast<uint64_t>(sample);
    for (int byte = 0; byte < 8; ++byte) {
      blob.push_back(static_cast<char>((bits >> (8 * byte)) & 0xff));
    }
  }
  return blob;
}

absl::StatusOr<std::vector<double>> DecodeSamples(std::string_view blob) {
  if (blob.size() % 8 != 0) {
    return absl::DataLossError(
        absl::StrCat("samples blob of ", blob.size(),
                     " bytes is not a whole number of 8-byte doubles"));
  }
  std::vector<double> samples(blob.size() / 8);
  for (size_t i = 0; i < samples.size(); ++i) {
    uint64_t bits = 0;
    for (int byte = 0; byte < 8; ++byte) {
      bits |= uint64_t{static_cast<unsigned char>(blob[i * 8 + byte])}
              << (8 * byte);
    }
    samples[i] = std::bit_cast<double>(bits);
  }
  return samples;
}

std::string SerializeMessage(const google::protobuf::MessageLite& message) {
  // Deterministic: equal messages give equal blobs (map fields included).
  std::string bytes;
  {
    // The streams give back their unused buffer when destroyed.
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

absl::Status ParseMessage(const std::string& bytes, std::string_view what,
                          google::protobuf::MessageLite* message) {
  if (message->ParseFromString(bytes)) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat("stored ", absl::string_view(what.data(), what.size()),
                   " does not parse as ", message->GetTypeName()));
}

}  // namespace moetune::db
