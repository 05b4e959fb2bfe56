// The migration scripts of one SQL dialect as the repository keeps them
// (migrations/<dialect>/NNNN_name.sql), for tests that build the schema an
// earlier version of the library left, rows and all, then migrate from it.
#pragma once

#include <soci/soci.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace idem::test {

struct migration_file {
    int version = 0;
    std::string name;                     // NNNN_name, as idem_schema_versions has it
    std::vector<std::string> statements;  // without comments, one at a time
};

// The scripts in `folder`, in version order.
inline std::vector<migration_file> migration_files(const std::filesystem::path& folder) {
    std::vector<migration_file> files;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
        if (entry.path().extension() != ".sql") continue;
        migration_file file;
        file.name = entry.path().stem().string();
        file.version = std::stoi(file.name.substr(0, 4));
        std::ifstream in(entry.path());
        std::string text;
        for (std::string line; std::getline(in, line);) text += line.substr(0, line.find("--")) + "\n";
        // SOCI runs only a string's first statement on SQLite.
        for (std::size_t at = 0, end = 0; (end = text.find(';', at)) != std::string::npos; at = end + 1)
            file.statements.push_back(text.substr(at, end - at));
        files.push_back(std::move(file));
    }
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.version < b.version; });
    return files;
}

// The version of the first script whose name ends with `suffix` ("_outbox"), or 0.
inline int version_named(const std::vector<migration_file>& files, const std::string& suffix) {
    for (const migration_file& f : files)
        if (f.name.ends_with(suffix)) return f.version;
    return 0;
}

// What the library left at `version`: each script up to it, and its row in
// idem_schema_versions as the migration runner writes it.
inline void migrate_through(soci::session& sql, const std::vector<migration_file>& files, int version) {
    sql << "CREATE TABLE idem_schema_versions (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
           " applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)";
    for (const migration_file& f : files) {
        if (f.version > version) break;
        for (const std::string& statement : f.statements) sql << statement;
        sql << "INSERT INTO idem_schema_versions (version, name) VALUES (:version, :name)", soci::use(f.version),
            soci::use(f.name);
    }
}

}  // namespace idem::test
