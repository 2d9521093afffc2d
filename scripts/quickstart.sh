#!/usr/bin/env bash
# Sets everything up and runs the main job: a one-shot sweep of the embedded
# default spec (deploy/example_sweep.json) with an embedded coordinator over
# a SQLite file and one local worker per GPU (a CPU worker where there is
# none). Extra arguments go to `moetune sweep`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh moetune moetune-worker moetune-coordinator
exec build/bin/moetune sweep --spec deploy/example_sweep.json --db moetune.db "$@"
