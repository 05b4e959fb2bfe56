// Names the example in include/idem/store_admin.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <array>
#include <cstddef>

#include "idem/sqlite_store.hpp"

extern idem::sqlite_store& store;
extern const idem::record_key key;
void print(bool completed, idem::time_point expires_at);
void print(const std::array<std::byte, 16>& key_hash, bool completed);
void ask_again();
