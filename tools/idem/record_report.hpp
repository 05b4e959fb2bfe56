// What `idem inspect` and `idem forget` share: the record an operator names
// (by digest or by its key flags), and how a record is shown. A record is only
// ever named by its hashes, never by its key or scope.
#pragma once

#include <cstddef>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "idem/store_admin.hpp"
#include "record_key_flags.hpp"

namespace idem::cli {

// A whole digest, or its first 16 bytes (the SQL tables' key_hash).
using digest = std::vector<std::byte>;

// Adds --key-hash and the key flags (record_key_flags), the two ways to name one record.
void add_record_options(CLI::App& command, std::string& key_hash, record_key_flags& key);

// The record --key-hash names, or the one --namespace, a scope flag and --key
// build; std::invalid_argument (or CLI::ValidationError) unless exactly one of
// the two ways is given, whole.
[[nodiscard]] digest named_record(const std::string& key_hash, const record_key_flags& key);

[[nodiscard]] std::string hex(std::span<const std::byte> d);
// UTC with milliseconds, "after"/"before" for the times a store clamps.
[[nodiscard]] std::string utc(time_point t);
// "in flight", "completed", "expired (was completed)".
[[nodiscard]] std::string state_of(const record_state& r);
// The hashes a record goes by: "key hash de6fe96d5b30bbc7 (SQL key_hash de6f...)".
[[nodiscard]] std::string names_of(const digest& d);

// inspect's description of one record, one "label: value" line each. A record
// on Redis has no SQL key_hash and no write time: those lines are left out.
void print_record(std::ostream& out, const digest& d, const record_state& r, bool on_redis = false);

// inspect's list of records (--recent, --since): a header, then one line each:
// key hash, SQL key_hash, state, written, expires, payload size.
void print_listed(std::ostream& out, const std::vector<listed_record>& rows);

}  // namespace idem::cli
