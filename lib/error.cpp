#include "idem/error.hpp"

namespace idem {
namespace {

std::string describe(const std::vector<std::string>& problems) {
    std::string message = "idem: invalid options:";
    for (const auto& problem : problems) message += " " + problem + ";";
    if (!problems.empty()) message.pop_back();
    return message;
}

}  // namespace

options_error::options_error(std::vector<std::string> problems)
    : error(error_category::configuration, describe(problems)), problems_(std::move(problems)) {}

}  // namespace idem
