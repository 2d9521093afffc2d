// The SQL views over the tables, for people who point Grafana (or sqlite3)
// at the file: trial_dimensions (one row per trial: its dimension columns,
// names instead of enum numbers) and trial_results (those rows with the
// result of their deciding attempt). Views hold no data, so they are not
// migrated: the migrations create tables, columns and indexes only, and a
// writer opening the database recreates these views from the one
// definition here after migrating, whatever version the file came from.
// The enum names come from the proto's descriptors, so a new TrialState
// (or Region) needs no SQL edit.
//
// Thread-safety: functions here use the Connection they are given and must
// not run concurrently with other users of it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "db/sqlite.h"

namespace moetune::db {

struct ViewDefinition {
  std::string name;
  std::string sql;  // CREATE VIEW name AS ..., as sqlite_master keeps it
};

// Every view of the store, each after the views it reads.
std::vector<ViewDefinition> ViewDefinitions();

// Drops the views of ViewDefinitions and creates them again, in one
// transaction; writes nothing when the database holds these definitions
// already. Views this store does not define are left alone.
absl::Status RecreateViews(Connection& conn);

}  // namespace moetune::db
