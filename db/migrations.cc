// RULE: migrations are append-only. Never reorder or delete a script that
// has shipped, nor change the tables, columns or indexes it makes:
// databases in the field have already applied it and will never run it
// again. To change the schema, append a new script (ALTER TABLE, CREATE
// INDEX, a table copy, ...). The same holds for the meaning of stored
// numbers: enum columns hold moetune.v1 enum numbers, which the proto keeps
// append-only too. Scripts make no views: views hold no data, and a writer
// recreates them after migrating from their one definition (db/views.h).

#include "db/migrations.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace moetune::db {
namespace {

// Version 1: the first schema. Times are ms since the Unix epoch; state and
// outcome columns hold moetune.v1 enum numbers; *_blob-like columns
// (probe, spec, workload, config, measurement, fingerprint, result) hold
// serialized moetune.v1 messages, and plain columns copy out what is filtered
// or sorted on.
constexpr std::string_view kV1Schema = R"sql(
CREATE TABLE fingerprints (
  hash           TEXT PRIMARY KEY NOT NULL,  -- Fingerprint.hash (hex)
  device_name    TEXT NOT NULL,
  sm_arch        TEXT NOT NULL,
  sm_count       INTEGER NOT NULL,
  sm_clock_mhz   INTEGER NOT NULL,
  mem_clock_mhz  INTEGER NOT NULL,
  driver_version TEXT NOT NULL,
  cuda_version   TEXT NOT NULL,
  nccl_version   TEXT NOT NULL,
  build_hash     TEXT NOT NULL,
  fingerprint    BLOB NOT NULL              -- v1.Fingerprint
);

CREATE TABLE workers (
  worker_id        TEXT PRIMARY KEY NOT NULL,
  name             TEXT NOT NULL,
  registered_at    INTEGER NOT NULL,        -- first registration (ms)
  last_heartbeat   INTEGER NOT NULL,        -- ms
  fingerprint_hash TEXT REFERENCES fingerprints(hash),  -- NULL: none sent
  probe            BLOB NOT NULL            -- v1.Probe, the latest
);

-- One row per backend per probe; probe_no counts a worker's probes from 1.
CREATE TABLE probes (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  worker_id     TEXT NOT NULL REFERENCES workers(worker_id),
  probe_no      INTEGER NOT NULL CHECK (probe_no >= 1),
  backend       TEXT NOT NULL,
  available     INTEGER NOT NULL CHECK (available IN (0, 1)),
  reason        TEXT NOT NULL,
  probed_at     INTEGER NOT NULL,           -- ms
  backend_probe BLOB NOT NULL               -- v1.BackendProbe (with tiles)
);
CREATE INDEX probes_by_worker ON probes(worker_id, probe_no);

CREATE TABLE sweeps (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  name        TEXT NOT NULL,
  spec        BLOB NOT NULL,                -- v1.SweepSpec
  state       INTEGER NOT NULL,             -- v1.SweepState
  created_at  INTEGER NOT NULL,             -- ms
  finished_at INTEGER                       -- ms; NULL while running
);

CREATE TABLE trials (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  sweep_id      INTEGER NOT NULL REFERENCES sweeps(id),
  state         INTEGER NOT NULL,           -- v1.TrialState
  attempt       INTEGER NOT NULL CHECK (attempt >= 0),  -- leases granted
  worker_id     TEXT NOT NULL DEFAULT '',   -- last worker to hold it
  reason        TEXT NOT NULL DEFAULT '',
  moe_backend   TEXT NOT NULL,
  workload_hash TEXT NOT NULL,
  workload      BLOB NOT NULL,              -- v1.Workload
  config        BLOB NOT NULL,              -- v1.TrialConfig
  measurement   BLOB NOT NULL,              -- v1.Measurement
  updated_at    INTEGER NOT NULL            -- ms
);
CREATE INDEX trials_by_sweep_state ON trials(sweep_id, state);
CREATE INDEX trials_by_workload ON trials(workload_hash);

-- Every report, including late ones that did not decide the trial's state.
CREATE TABLE results (
  trial_id         INTEGER NOT NULL REFERENCES trials(id),
  attempt          INTEGER NOT NULL CHECK (attempt >= 1),
  outcome          INTEGER NOT NULL,        -- v1.TrialState
  worker_id        TEXT NOT NULL,
  median_us        REAL NOT NULL,
  mean_us          REAL NOT NULL,
  p90_us           REAL NOT NULL,
  p99_us           REAL NOT NULL,
  stddev_us        REAL NOT NULL,
  ci_low_us        REAL NOT NULL,
  ci_high_us       REAL NOT NULL,
  floor_us         REAL NOT NULL,
  efficiency       REAL NOT NULL,
  max_rel_error    REAL NOT NULL,
  fingerprint_hash TEXT REFERENCES fingerprints(hash),  -- NULL: none sent
  samples          BLOB NOT NULL,  -- samples_us: IEEE-754 doubles, 8 bytes LE
  result           BLOB NOT NULL,  -- v1.TrialResult without samples_us
  recorded_at      INTEGER NOT NULL,        -- ms
  PRIMARY KEY (trial_id, attempt)
);
)sql";

// Version 2: strategies beyond the grid. A trial remembers the fidelity it
// was proposed at and its proposal key (a resumed sweep never reruns a
// proposal), and the accepted best per (workload, fingerprint) is kept as
// the incumbent a challenger must beat beyond the noise.
constexpr std::string_view kV2Strategies = R"sql(
ALTER TABLE trials ADD COLUMN rung INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN confirm_round INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN proposal_key TEXT NOT NULL DEFAULT '';
CREATE INDEX trials_by_proposal ON trials(sweep_id, proposal_key);

-- Append-only history: the latest row per (workload, fingerprint) is the
-- incumbent; earlier rows say what each sweep was judged against.
CREATE TABLE incumbents (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  workload_hash    TEXT NOT NULL,
  fingerprint_hash TEXT NOT NULL,
  trial_id         INTEGER NOT NULL REFERENCES trials(id),
  accepted_at      INTEGER NOT NULL           -- ms
);
CREATE INDEX incumbents_by_workload ON incumbents(workload_hash, fingerprint_hash);
)sql";

// Version 3: identity, idempotence and scale. A worker registration has a
// secret token (only its SHA-256 is stored) so that only the lease holder's
// calls count, also after a coordinator restart; a sweep remembers the
// client's request id so that a retried submit returns the same sweep; the
// next queued trial, a page of a sweep's trials and what a watcher has not
// seen are found without reading (or sorting) all of them.
constexpr std::string_view kV3Identity = R"sql(
ALTER TABLE workers ADD COLUMN token_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE sweeps ADD COLUMN request_id TEXT;  -- NULL: none given
CREATE UNIQUE INDEX sweeps_by_request_id ON sweeps(request_id)
  WHERE request_id IS NOT NULL;
CREATE INDEX trials_by_state_backend ON trials(state, moe_backend);
CREATE INDEX trials_by_sweep ON trials(sweep_id);  -- a sweep's pages by id
CREATE INDEX trials_by_sweep_update ON trials(sweep_id, updated_at);  -- watches
)sql";

// Version 4: the dimensions a chart groups by as plain columns, for people
// who point Grafana (or sqlite3) at the file: before this version batch,
// context, tile, tp, ep and graph lived only inside the workload / config
// blobs, which SQL cannot read. The store fills them on insert and, once,
// for rows written before this version (FillTrialDimensions); NULL means
// "not filled yet". The views of db/views.h show them with every state
// named and the deciding result joined.
constexpr std::string_view kV4Dimensions = R"sql(
ALTER TABLE trials ADD COLUMN model_preset TEXT;        -- Workload.model_preset
ALTER TABLE trials ADD COLUMN region INTEGER;           -- v1.Region
ALTER TABLE trials ADD COLUMN batch_size INTEGER;       -- tokens per step
ALTER TABLE trials ADD COLUMN context_length INTEGER;   -- tokens in the cache
ALTER TABLE trials ADD COLUMN chain_layers INTEGER;     -- Workload.chain_layers
ALTER TABLE trials ADD COLUMN tile_n INTEGER;           -- TileShape.block_n; 0 = none
ALTER TABLE trials ADD COLUMN tile_k INTEGER;           -- TileShape.block_k; 0 = none
ALTER TABLE trials ADD COLUMN tp INTEGER;               -- ranks
ALTER TABLE trials ADD COLUMN ep INTEGER;               -- ranks
ALTER TABLE trials ADD COLUMN cuda_graph INTEGER;       -- 0 or 1
)sql";

// Version 5: the decode step's formats (Workload.quantization and
// kv_cache_dtype) as columns, which the views show beside the other
// dimensions. quantization holds the groups that differ from the default,
// e.g. 'attention=NVFP4 lm_head=NVFP4' ('' = the default map);
// kv_cache_dtype the v1.KvCacheDtype name. Rows written before this version
// were all the default (the tuner did not carry the fields): NULL reads as
// it.
constexpr std::string_view kV5Formats = R"sql(
ALTER TABLE trials ADD COLUMN quantization TEXT;    -- non-default groups
ALTER TABLE trials ADD COLUMN kv_cache_dtype TEXT;  -- v1.KvCacheDtype name
)sql";

// Version 6: the attention (TrialConfig.attention_split) as a column, which
// the views show beside tp and ep: 'tp' or 'dp' (data-parallel attention).
// Rows written before this version were all tp attention (the tuner did
// not carry the field): NULL reads as it.
constexpr std::string_view kV6Attention = R"sql(
ALTER TABLE trials ADD COLUMN attention TEXT;  -- 'tp' or 'dp'
)sql";

// Version 7: the tile's ring depth (TileShape.stages) as a column, which
// the views add to the tile text ('128x256s4'; without an 's' part for the
// kernel's own depth). Rows written before this version had none: NULL
// reads as 0.
constexpr std::string_view kV7TileStages = R"sql(
ALTER TABLE trials ADD COLUMN tile_stages INTEGER;  -- TileShape.stages; 0 = own
)sql";

// Version 8: no table changes. Trial configs and sweep specs written from
// this version on hold the all-reduce and the attention split as enums
// (TrialConfig.all_reduce_impl / attention_split, SearchSpace's lists),
// which a build of an earlier version would read as NCCL and tp: the
// version alone makes such builds refuse the file. Configs and specs
// stored before it keep their strings, read as the enums
// (ReadLegacyFields).
constexpr std::string_view kV8LayoutEnums = R"sql(
-- The schema is version 7's.
)sql";

// Append new scripts at the end; see the rule at the top of this file.
constexpr std::string_view kMigrations[] = {
    kV1Schema,  kV2Strategies, kV3Identity,   kV4Dimensions,
    kV5Formats, kV6Attention,  kV7TileStages, kV8LayoutEnums,
};

}  // namespace

std::span<const std::string_view> ShippedMigrations() { return kMigrations; }

int LatestMigrationVersion() {
  return static_cast<int>(ShippedMigrations().size());
}

absl::StatusOr<int> ReadUserVersion(Connection& conn) {
  ASSIGN_OR_RETURN(const int64_t version,
                   conn.QueryInt64("PRAGMA user_version"));
  return static_cast<int>(version);
}

absl::StatusOr<int> Migrate(Connection& conn,
                            std::span<const std::string_view> scripts) {
  const int latest = static_cast<int>(scripts.size());
  while (true) {
    // The version is read inside the write transaction so that two
    // processes opening one file cannot both apply the same script.
    ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn));
    ASSIGN_OR_RETURN(const int version, ReadUserVersion(conn));
    if (version > latest) {
      return absl::FailedPreconditionError(absl::StrCat(
          "database schema version ", version,
          " is newer than this build knows (latest ", latest,
          "); it was written by a newer moetune: upgrade this binary"));
    }
    if (version == latest) return version;  // txn rolls back: nothing done
    absl::Status status = conn.Exec(scripts[version]);
    if (status.ok()) {
      status = conn.Exec(absl::StrCat("PRAGMA user_version = ", version + 1));
    }
    if (status.ok()) status = txn.Commit();
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("migration to schema version ", version + 1,
                       " failed: ", status.message()));
    }
    LogInfo("db: migrated schema to version ", version + 1);
  }
}

}  // namespace moetune::db
