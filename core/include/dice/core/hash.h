#pragma once
// Content hashes for the content-addressed caches.

#include <string>
#include <string_view>

namespace dice {

/// SHA-256 of `data` as 64 lowercase hex characters (OpenSSL's EVP interface).
/// Throws dice::Error if OpenSSL fails.
std::string sha256_hex(std::string_view data);

}  // namespace dice
