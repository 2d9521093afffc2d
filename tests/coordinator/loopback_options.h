// The options of a coordinator that the tests start on loopback: ports
// chosen by the OS, an in-memory database, a 5 s lease and 100 ms
// heartbeats.
#pragma once

#include "coordinator/server.h"

namespace moetune::coordinator {

inline ServerOptions LoopbackOptions() {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.worker_listen = "127.0.0.1:0";
  options.db_path = ":memory:";
  options.scheduler.lease_ms = 5000;
  options.scheduler.heartbeat_interval_ms = 100;
  return options;
}

}  // namespace moetune::coordinator
