// The JSON options file, read for options_source (lib/options_file.cpp).
#pragma once

#include <filesystem>
#include <set>
#include <string>

#include "idem/options.hpp"

namespace idem::detail {

// Reads and checks the file (store names against `stores` when given); throws
// options_error naming every problem.
[[nodiscard]] executor_options read_options_file(const std::filesystem::path& path,
                                                 const std::set<std::string, std::less<>>* stores);

}  // namespace idem::detail
