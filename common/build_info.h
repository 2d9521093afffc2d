// The build's identity, recorded in every environment fingerprint and printed
// by --version.
#pragma once

namespace moetune {
// `git describe --always --dirty` at build time, or "unknown".
const char* BuildHash();
// The release version (CMakeLists.txt's project(VERSION)).
const char* Version();
}  // namespace moetune
