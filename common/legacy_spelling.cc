#include "common/legacy_spelling.h"

#include <array>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace moetune {
namespace {

// One dimension's spelling: its legacy string field, its enum fields (a
// config's and a space's), and the enum value of each allowed string, the
// default first.
template <typename Enum>
struct Spelling {
  const char* legacy_field;
  const char* enum_field;
  const char* enum_list;
  std::array<std::pair<const char*, Enum>, 2> values;

  std::string Allowed() const {
    return absl::StrCat(values[0].first, ", ", values[1].first);
  }
  std::optional<Enum> Parse(const std::string& text) const {
    for (const auto& [name, value] : values) {
      if (text == name) return value;
    }
    return std::nullopt;
  }
  const char* Text(Enum value) const {
    for (const auto& [name, known] : values) {
      if (known == value) return name;
    }
    return values[0].first;
  }
};

constexpr Spelling<v1::AllReduceImpl> kAllReduce{
    "allreduce",
    "all_reduce_impl",
    "all_reduce_impls",
    {{{"nccl", v1::ALL_REDUCE_NCCL}, {"oneshot", v1::ALL_REDUCE_ONESHOT}}}};
constexpr Spelling<v1::AttentionSplit> kAttention{
    "attention",
    "attention_split",
    "attention_splits",
    {{{"tp", v1::ATTENTION_TP}, {"dp", v1::ATTENTION_DP}}}};

template <typename Enum>
std::string EnumName(Enum value) {
  const auto* known =
      google::protobuf::GetEnumDescriptor<Enum>()->FindValueByNumber(value);
  return known != nullptr ? known->name() : absl::StrCat(value);
}

absl::Status NotAllowed(const std::string& path, const std::string& text,
                        const std::string& allowed) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": '", text, "' is not allowed; allowed: ", allowed));
}

// The enum a config's legacy string spells; `set` is the enum field's
// value, which a non-empty string must agree with when it is set.
template <typename Enum>
absl::Status MoveString(const Spelling<Enum>& spelling, const std::string& text,
                        Enum* set) {
  if (text.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat("config.", spelling.legacy_field);
  const std::optional<Enum> parsed = spelling.Parse(text);
  if (!parsed.has_value()) return NotAllowed(path, text, spelling.Allowed());
  if (*set != Enum{} && *set != *parsed) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": '", text, "' disagrees with config.", spelling.enum_field, " ",
        EnumName(*set), "; set one of them"));
  }
  *set = *parsed;
  return absl::OkStatus();
}

// Appends the enums a space's legacy list spells to the (empty) enum list.
template <typename Enum>
absl::Status MoveList(
    const Spelling<Enum>& spelling,
    const google::protobuf::RepeatedPtrField<std::string>& legacy,
    google::protobuf::RepeatedField<int>* enums) {
  if (legacy.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat("space.", spelling.legacy_field);
  if (!enums->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": listed beside space.", spelling.enum_list,
                     "; list the values in one of them"));
  }
  for (int i = 0; i < legacy.size(); ++i) {
    const std::optional<Enum> parsed = spelling.Parse(legacy.Get(i));
    if (!parsed.has_value()) {
      return NotAllowed(absl::StrCat(path, "[", i, "]"), legacy.Get(i),
                        spelling.Allowed());
    }
    enums->Add(*parsed);
  }
  return absl::OkStatus();
}

}  // namespace

const char* AllReduceImplText(v1::AllReduceImpl impl) {
  return kAllReduce.Text(impl);
}

const char* AttentionSplitText(v1::AttentionSplit split) {
  return kAttention.Text(split);
}

absl::Status NormalizeLegacyFields(v1::TrialConfig& config) {
  v1::AllReduceImpl impl = config.all_reduce_impl();
  v1::AttentionSplit split = config.attention_split();
  RETURN_IF_ERROR(MoveString(kAllReduce, config.allreduce(), &impl));
  RETURN_IF_ERROR(MoveString(kAttention, config.attention(), &split));
  config.set_all_reduce_impl(impl);
  config.set_attention_split(split);
  config.clear_allreduce();
  config.clear_attention();
  return absl::OkStatus();
}

absl::Status NormalizeLegacyFields(v1::SearchSpace& space) {
  if (space.allreduce().empty() && space.attention().empty()) {
    return absl::OkStatus();
  }
  v1::SearchSpace out = space;
  RETURN_IF_ERROR(
      MoveList(kAllReduce, out.allreduce(), out.mutable_all_reduce_impls()));
  RETURN_IF_ERROR(
      MoveList(kAttention, out.attention(), out.mutable_attention_splits()));
  out.clear_allreduce();
  out.clear_attention();
  space = std::move(out);
  return absl::OkStatus();
}

}  // namespace moetune
