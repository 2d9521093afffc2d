// The dimension columns of `trials` (schema versions 4 to 7): batch,
// context, tile, tp, ep, graph, the quantization map and KV dtype, the
// attention, the tile's stages, copied out of the workload and config blobs
// so that SQL (Grafana, sqlite3, the views of db/views.h) can group by
// them. Written with every new trial; rows from before version 4 are filled
// once when a writer opens the database. Called with the store's lock held;
// no state of its own.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "db/sqlite.h"
#include "proto/moetune.pb.h"

namespace moetune::db {

// The workload's formats as the columns (and the CLI) show them: the
// quantization groups set to other than their default (the defaults of
// kernels/reference/step_spec.h) in field order, "group=PRECISION"
// space-separated ('' for the default map), e.g. "attention=NVFP4
// lm_head=NVFP4"; the KV cache dtype's name (unset: "KV_BF16").
std::string QuantizationText(const v1::QuantizationMap& quantization);
std::string KvDtypeText(v1::KvCacheDtype dtype);

// Sets the dimension columns of trial `trial_id` from its messages (the
// config's enums: its legacy strings are read where it comes in); the
// attention column holds AttentionSplitText's "tp" or "dp".
absl::Status WriteTrialDimensions(Connection& conn, int64_t trial_id,
                                  const v1::Workload& workload,
                                  const v1::TrialConfig& config);

// Fills the columns of every trial whose batch_size is still NULL, decoding
// its stored blobs (ReadLegacyFields), in one transaction. Cheap when there
// is none.
absl::Status FillTrialDimensions(Connection& conn);

}  // namespace moetune::db
