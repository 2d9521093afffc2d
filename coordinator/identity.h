// Worker identity: each registration gets a fresh worker id and an
// unguessable token (256 bits from the kernel's random source); only the
// token's SHA-256 is kept (in memory and in the database), and every later
// call of the worker is checked against it. Pure functions apart from the
// random source; thread-safe.
#pragma once

#include <string>

namespace moetune::coordinator {

// "w:<name>/<8 hex>": readable, unique per registration.
std::string NewWorkerId(const std::string& name);
// 64 lowercase hex characters.
std::string NewToken();
// Lowercase hex SHA-256 of the token.
std::string TokenDigest(const std::string& token);
// Compares digests in constant time (a timing side channel would leak how
// much of a guessed token was right).
bool SameDigest(const std::string& a, const std::string& b);

}  // namespace moetune::coordinator
