// BackendCatalog: the backends a sweep may name. The native ones are
// compiled in (kernels/backends/registry.h); the out-of-process (plugin)
// backends are what workers offer, known from their stored probes
// (BackendProbe.plugin non-empty, docs/plugins.md). Each plugin backend is
// described as a native one is, by a BackendDescriptor built from its probe:
// its tiles, graph capturability and placement; it times MOE_LAYER only and
// has no shape rules of its own.
//
// A sweep records the plugin backends it names in its stored spec
// (SearchSpace.plugin_backends), so that a stored sweep is planned again
// from its spec alone (Recorded). Immutable once made and cheap to copy
// (descriptors are shared); thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backends/descriptor.h"
#include "proto/moetune.pb.h"

namespace moetune::tuner {

class BackendCatalog {
 public:
  // The native backends only.
  BackendCatalog() = default;

  // Native, plus the plugin backends of these workers' probes. Probes of a
  // native name or without a plugin command are not plugin backends. Where
  // several workers offer one backend, its tiles are the union over the
  // probes that say it is available (over all of them when none does), in
  // the order first seen; graph capture and GPU placement hold when one
  // such probe says so.
  static BackendCatalog FromProbes(const std::vector<v1::Probe>& probes);
  // Native, plus the plugin backends a stored spec recorded.
  static BackendCatalog Recorded(const v1::SearchSpace& space);

  // The descriptor of `name`, native first; nullptr when neither kind has
  // it.
  const backends::BackendDescriptor* Find(std::string_view name) const;
  // True when `name` is one of the plugin backends here.
  bool IsPlugin(std::string_view name) const;
  // What a refused name may be instead, for messages: "native: a, b, c;
  // plugin backends of the registered workers: x, y" ("none" when no
  // worker offers one).
  std::string AllowedText() const;
  // The entries of `space.moe_backends` that are plugin backends, in list
  // order, as SearchSpace.plugin_backends records them.
  std::vector<v1::BackendProbe> RecordFor(const v1::SearchSpace& space) const;

 private:
  struct Plugin;
  static std::shared_ptr<const Plugin> MakePlugin(v1::BackendProbe record);

  std::map<std::string, std::shared_ptr<const Plugin>, std::less<>> plugins_;
};

}  // namespace moetune::tuner
