// A temporary folder a server can own, and the user servers run as.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace idem::test {

// Who test servers run as: `nobody` when the tests run as root (PostgreSQL
// refuses root, and no test server needs it), else the current user.
struct server_user {
    uid_t uid;
    gid_t gid;
    bool switch_needed;  // true when the current user is root
    std::string name;

    [[nodiscard]] static const server_user& get();
};

// A fresh folder under the system temp directory, owned by server_user().
// Removed with everything in it when the object dies.
class temp_dir {
public:
    explicit temp_dir(std::string_view label);
    ~temp_dir();
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;

    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace idem::test
