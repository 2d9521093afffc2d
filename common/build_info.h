// The build's identity, recorded in every environment fingerprint.
#pragma once

namespace moetune {
// `git describe --always --dirty` at configure time, or "unknown".
const char* BuildHash();
}  // namespace moetune
