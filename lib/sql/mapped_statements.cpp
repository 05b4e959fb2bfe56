#include "sql/mapped_statements.hpp"

#include <soci/soci.h>

#include <cctype>
#include <charconv>
#include <exception>
#include <string>

#include "idem/error.hpp"
#include "idem/unit_of_work.hpp"
#include "sql/mapping_statements.hpp"
#include "sql/soci_errors.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/sql_transaction.hpp"
#include "sql/unnamed_statement.hpp"

namespace idem::detail {
namespace {

// Called in a catch block: SOCI's exception as a store_error (its text, which
// can quote values, stays out of what()), anything else as it is.
[[noreturn]] void rethrow_translated(const table& type, soci::session& sql) {
    try {
        rethrow_soci_as_store_error("a statement of " + std::string(type.type), &sql);
    } catch (const store_error& e) {
        std::throw_with_nested(e);
    }
}

bool same_name(std::string_view a, std::string_view b) {
    // PostgreSQL folds the unquoted names the mapping's statements use to lower case.
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

bool parse_boolean(std::string_view text, long long& out) {
    // SQLite keeps 0 and 1; PostgreSQL's boolean reads as t and f.
    if (text == "1" || text == "t" || text == "true" || text == "TRUE") {
        out = 1;
        return true;
    }
    if (text == "0" || text == "f" || text == "false" || text == "FALSE") {
        out = 0;
        return true;
    }
    return false;
}

}  // namespace

// One SOCI statement with its parameters and columns bound once: the caller
// fills `in`, executes, and reads the row. Text, integer and boolean columns
// are read as text and converted here, so a value that does not convert names
// its column; a real column is read as a double (text would round it).
class bound_statement {
public:
    bound_statement(soci::session& sql, const std::string& text, std::vector<field_kind> in_kinds, const table* reads,
                    bool keep)
        : st_(sql) {
        in.resize(in_kinds.size());
        in_ind_.resize(in_kinds.size(), soci::i_ok);
        const std::size_t columns = reads != nullptr ? reads->size : 0;
        text_.resize(columns);
        real_.resize(columns);
        out_ind_.resize(columns, soci::i_ok);
        for (std::size_t i = 0; i < in_kinds.size(); ++i) {
            switch (in_kinds[i]) {
                case field_kind::text: st_.exchange(soci::use(in[i].text, in_ind_[i])); break;
                case field_kind::real: st_.exchange(soci::use(in[i].real, in_ind_[i])); break;
                case field_kind::integer:
                case field_kind::boolean: st_.exchange(soci::use(in[i].integer, in_ind_[i])); break;
            }
        }
        for (std::size_t i = 0; i < columns; ++i) {
            if (reads->fields[i].kind == field_kind::real)
                st_.exchange(soci::into(real_[i], out_ind_[i]));
            else
                st_.exchange(soci::into(text_[i], out_ind_[i]));
        }
        prepare_statement(st_, text, keep);
    }

    std::vector<cell> in;

    bool execute() {
        for (std::size_t i = 0; i < in.size(); ++i) in_ind_[i] = in[i].null ? soci::i_null : soci::i_ok;
        return execute_kept(st_);
    }
    bool fetch() { return st_.fetch(); }
    long long affected() { return st_.get_affected_rows(); }

    // The row just fetched, as cells.
    void read(const table& type, std::vector<cell>& row) const {
        row.resize(type.size);
        for (std::size_t i = 0; i < type.size; ++i) {
            const field& f = type.fields[i];
            cell& c = row[i];
            c.null = out_ind_[i] == soci::i_null;
            if (c.null) continue;
            const std::string& text = text_[i];
            switch (f.kind) {
                case field_kind::text: c.text = text; break;
                case field_kind::real: c.real = real_[i]; break;
                case field_kind::boolean:
                    if (!parse_boolean(text, c.integer))
                        throw mapping_error(std::string(type.type), f.name, "holds a value that is no boolean");
                    break;
                case field_kind::integer: {
                    const auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), c.integer);
                    if (failure != std::errc() || end != text.data() + text.size())
                        throw mapping_error(std::string(type.type), f.name,
                                            "holds a value that is no integer (or past 64 bits)");
                    break;
                }
            }
        }
    }

private:
    std::vector<soci::indicator> in_ind_;
    std::vector<std::string> text_;
    std::vector<double> real_;
    std::vector<soci::indicator> out_ind_;
    soci::statement st_;  // last: it refers to the buffers above
};

namespace {

// Runs a write, its failure translated as every statement's is; the rows it changed.
long long run_write(const table& type, unit_of_work& uow, bound_statement& st) {
    soci::session& sql = uow.sql();
    try {
        st.execute();
        return st.affected();
    } catch (...) {
        rethrow_translated(type, sql);
    }
}

// The dialect's SQL for mapped rows.
const mapping_statements& sql_of(unit_of_work& uow) {
    return uow.internals().dialect().mapping();
}

// Every mapped type's statements on one connection, by type name.
struct statement_cache {
    std::unordered_map<std::string, std::unique_ptr<mapped_statements>> types;
};

}  // namespace

mapped_statements& mapped_statements::of(unit_of_work& uow, const table& type) {
    static const std::uint64_t owner = new_connection_cache_owner();
    std::shared_ptr<void>& slot = uow.internals().connection_cache(owner);
    if (!slot) slot = std::make_shared<statement_cache>();
    auto& types = static_cast<statement_cache*>(slot.get())->types;
    auto found = types.find(std::string(type.type));
    if (found == types.end())
        found = types.emplace(std::string(type.type), std::make_unique<mapped_statements>(type)).first;
    mapped_statements& statements = *found->second;
    if (!statements.checked_) statements.check_columns(uow);
    return statements;
}

mapped_statements::mapped_statements(const table& type) : type_(type) {}
mapped_statements::~mapped_statements() = default;

void mapped_statements::check_columns(unit_of_work& uow) {
    soci::session& sql = uow.sql();
    soci::row columns;
    try {
        sql << uow.internals().dialect().mapping().probe(type_), soci::into(columns);
    } catch (const soci::soci_error&) {
        try {
            rethrow_translated(type_, sql);
        } catch (const error& e) {
            if (e.is_transient()) throw;
            std::throw_with_nested(mapping_error(std::string(type_.type), "",
                                                 "its table " + std::string(type_.name) + " is missing or unreadable"));
        }
    }
    for (std::size_t i = 0; i < type_.size; ++i) {
        bool present = false;
        for (std::size_t c = 0; c < columns.size() && !present; ++c)
            present = same_name(columns.get_properties(c).get_name(), type_.fields[i].name);
        if (!present)
            throw mapping_error(std::string(type_.type), type_.fields[i].name,
                                "table " + std::string(type_.name) + " has no such column");
    }
    checked_ = true;
}

bound_statement& mapped_statements::prepared(unit_of_work& uow, std::unique_ptr<bound_statement>& slot,
                                             std::unique_ptr<bound_statement>& once, const std::string& text,
                                             std::vector<field_kind> in, bool reads) {
    if (slot) return *slot;
    soci::session& sql = uow.sql();
    const bool keep = uow.internals().keeps_statements();
    std::unique_ptr<bound_statement>& into = keep ? slot : once;
    try {
        into = std::make_unique<bound_statement>(sql, text, std::move(in), reads ? &type_ : nullptr, keep);
    } catch (...) {
        rethrow_translated(type_, sql);
    }
    return *into;
}

bool mapped_statements::load(unit_of_work& uow, const cell& key, bool lock, std::vector<cell>& row) {
    std::unique_ptr<bound_statement> once;
    std::unique_ptr<bound_statement>& slot = fixed_[lock ? load_locked : load_plain];
    bound_statement& st = prepared(uow, slot, once, slot ? std::string() : sql_of(uow).load(type_, lock),
                                   {type_.fields[type_.key].kind}, true);
    st.in[0] = key;
    soci::session& sql = uow.sql();
    try {
        if (!st.execute()) return false;
        st.read(type_, row);
        // Runs the statement to its end: a SQLite statement left on its row
        // would hold a read transaction open past COMMIT.
        while (st.fetch()) {
        }
    } catch (const error&) {
        throw;
    } catch (...) {
        rethrow_translated(type_, sql);
    }
    return true;
}

void mapped_statements::select(unit_of_work& uow, std::string_view where, std::span<const parameter> params, bool lock,
                               const std::function<void(std::vector<cell>&)>& each) {
    std::unique_ptr<bound_statement> once;
    const std::string text = sql_of(uow).select(type_, where, lock);
    std::vector<field_kind> kinds;
    for (const parameter& p : params) kinds.push_back(p.kind);
    soci::session& sql = uow.sql();
    try {
        once = std::make_unique<bound_statement>(sql, text, std::move(kinds), &type_, false);
    } catch (...) {
        rethrow_translated(type_, sql);
    }
    for (std::size_t i = 0; i < params.size(); ++i) once->in[i] = params[i].value;
    std::vector<std::vector<cell>> rows;
    try {
        for (bool more = once->execute(); more; more = once->fetch()) once->read(type_, rows.emplace_back());
    } catch (const error&) {
        throw;
    } catch (...) {
        rethrow_translated(type_, sql);
    }
    // Handed over once the statement is done: `each` may run statements of its own.
    for (std::vector<cell>& row : rows) each(row);
}

void mapped_statements::insert(unit_of_work& uow, const std::vector<cell>& row) {
    std::unique_ptr<bound_statement> once;
    std::vector<field_kind> kinds;
    for (std::size_t i = 0; i < type_.size; ++i) kinds.push_back(type_.fields[i].kind);
    std::unique_ptr<bound_statement>& slot = fixed_[insert_row];
    bound_statement& st =
        prepared(uow, slot, once, slot ? std::string() : sql_of(uow).insert(type_), std::move(kinds), false);
    for (std::size_t i = 0; i < type_.size; ++i) st.in[i] = row[i];
    (void)run_write(type_, uow, st);
}

long long mapped_statements::update(unit_of_work& uow, std::uint64_t changed, const std::vector<cell>& row,
                                    const cell* seen) {
    std::unique_ptr<bound_statement> once;
    std::unique_ptr<bound_statement>& slot = updates_[changed | (seen != nullptr ? 0 : std::uint64_t{1} << 63)];
    std::vector<field_kind> kinds;
    for (std::size_t i = 0; i < type_.size; ++i)
        if ((changed & (std::uint64_t{1} << i)) != 0) kinds.push_back(type_.fields[i].kind);
    kinds.push_back(type_.fields[type_.key].kind);
    if (seen != nullptr) kinds.push_back(type_.fields[type_.version].kind);
    bound_statement& st =
        prepared(uow, slot, once, slot ? std::string() : sql_of(uow).update(type_, changed, seen != nullptr),
                 std::move(kinds), false);
    std::size_t n = 0;
    for (std::size_t i = 0; i < type_.size; ++i)
        if ((changed & (std::uint64_t{1} << i)) != 0) st.in[n++] = row[i];
    st.in[n++] = row[type_.key];
    if (seen != nullptr) st.in[n] = *seen;
    return run_write(type_, uow, st);
}

long long mapped_statements::erase(unit_of_work& uow, const cell& key, const cell* seen) {
    std::unique_ptr<bound_statement> once;
    std::vector<field_kind> kinds{type_.fields[type_.key].kind};
    if (seen != nullptr) kinds.push_back(type_.fields[type_.version].kind);
    std::unique_ptr<bound_statement>& slot = fixed_[seen != nullptr ? erase_versioned : erase_plain];
    bound_statement& st = prepared(uow, slot, once, slot ? std::string() : sql_of(uow).erase(type_, seen != nullptr),
                                   std::move(kinds), false);
    st.in[0] = key;
    if (seen != nullptr) st.in[1] = *seen;
    return run_write(type_, uow, st);
}

}  // namespace idem::detail
