#include "temp_dir.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace idem::test {

const server_user& server_user::get() {
    static const server_user user = [] {
        if (geteuid() != 0) return server_user{geteuid(), getegid(), false, "current user"};
        std::vector<char> buffer(16384);
        passwd entry{};
        passwd* found = nullptr;
        if (getpwnam_r("nobody", &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr)
            throw std::runtime_error("running as root, and there is no user 'nobody' to run test servers as");
        return server_user{found->pw_uid, found->pw_gid, true, "nobody"};
    }();
    return user;
}

temp_dir::temp_dir(std::string_view label) {
    const auto name = "idem-" + std::string(label) + "-XXXXXX";
    std::string pattern = (std::filesystem::temp_directory_path() / name).string();
    if (mkdtemp(pattern.data()) == nullptr)
        throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    path_ = pattern;
    const auto& user = server_user::get();
    if (user.switch_needed && chown(path_.c_str(), user.uid, user.gid) != 0) {
        const int saved = errno;
        std::filesystem::remove(path_);
        throw std::system_error(saved, std::generic_category(), "chown " + path_.string());
    }
}

temp_dir::~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

}  // namespace idem::test
