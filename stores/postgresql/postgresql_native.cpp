#include "postgresql_native.hpp"

#include <poll.h>
#include <soci/postgresql/soci-postgresql.h>
#include <soci/session.h>
#include <algorithm>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "internal/saturating_time.hpp"

namespace idem::detail::pg {
namespace {

// Seconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC).
constexpr std::int64_t postgres_epoch = 946'684'800;

// Big-endian (network order) integers, as PostgreSQL's binary format has them.
std::int64_t from_network(const char* bytes) noexcept {
    std::uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
    return static_cast<std::int64_t>(value);
}

template <class Int>
void to_network(Int value, char* out) noexcept {
    auto bits = static_cast<std::make_unsigned_t<Int>>(value);
    for (int i = static_cast<int>(sizeof(Int)) - 1; i >= 0; --i) {
        out[i] = static_cast<char>(bits & 0xffU);
        bits = static_cast<decltype(bits)>(bits >> 8);
    }
}

const char* describe(store_failure failure, std::string_view sqlstate) noexcept {
    if (sqlstate == "25P02") return "the transaction had already failed";
    if (sqlstate == "25006") return "the server takes no writes (a standby, or a primary made read-only)";
    // The completing statement sent with COMMIT raises it when it completed nothing.
    if (sqlstate == "22P02") return "the record was not completed";
    switch (failure) {
        case store_failure::connection_lost: return "the connection to PostgreSQL was lost";
        case store_failure::timeout: return "lock or statement timeout";
        case store_failure::conflict: return "serialization failure or deadlock";
        case store_failure::lost_race: return "a concurrent transaction committed the same record first";
        case store_failure::schema: return "the idem schema is missing or outdated (run migrate())";
        case store_failure::corrupt_record: return "corrupt record";
        case store_failure::constraint: return "a constraint rejected the write";
        case store_failure::unsupported: return "unsupported";
        case store_failure::other: break;
    }
    return "database error";
}

}  // namespace

PGconn* native_handle(soci::session& session) {
    if (session.get_backend() == nullptr || session.get_backend_name() != "postgresql")
        throw std::invalid_argument("idem: the session is not a PostgreSQL session");
    return static_cast<soci::postgresql_session_backend*>(session.get_backend())->conn_;
}

bool broken(const PGconn* conn) noexcept {
    return conn == nullptr || PQstatus(conn) == CONNECTION_BAD;
}

bool on_read_only_server(const PGconn* conn) noexcept {
    for (const char* parameter : {"in_hot_standby", "default_transaction_read_only"}) {
        const char* value = PQparameterStatus(conn, parameter);
        if (value != nullptr && std::string_view(value) == "on") return true;
    }
    return false;
}

bool still_usable(PGconn* conn) noexcept {
    // A server that shuts down sends a FATAL message, then closes the socket:
    // the first read takes the message, a later one sees the end of the stream.
    for (int reads = 0; reads < 8; ++reads) {
        if (broken(conn)) return false;
        pollfd waiting{PQsocket(conn), POLLIN, 0};
        if (::poll(&waiting, 1, 0) <= 0) return !on_read_only_server(conn);  // nothing (more) arrived while it was idle
        if (PQconsumeInput(conn) == 0) return false;
        while (PGnotify* note = PQnotifies(conn)) PQfreemem(note);
    }
    return !broken(conn) && !on_read_only_server(conn);
}

void silence_notices(PGconn* conn) noexcept {
    PQsetNoticeProcessor(
        conn, [](void*, const char*) {}, nullptr);
}

store_failure classify(std::string_view sqlstate) noexcept {
    if (sqlstate.starts_with("08")) return store_failure::connection_lost;
    // A read-only transaction refused a write: the server is a standby, or a primary
    // demoted or made read-only. The connection is as good as lost: the unit of work
    // runs again on a new one, which a multi-host URL with target_session_attrs=read-write
    // opens on whichever server now takes writes.
    if (sqlstate == "25006") return store_failure::connection_lost;
    if (sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03" || sqlstate == "53300")
        return store_failure::connection_lost;  // shutdown, crash, starting up, too many connections
    if (sqlstate == "40001" || sqlstate == "40P01") return store_failure::conflict;
    if (sqlstate == "55P03" || sqlstate == "57014") return store_failure::timeout;
    if (sqlstate == "42P01" || sqlstate == "42703" || sqlstate == "42883") return store_failure::schema;
    if (sqlstate.starts_with("23")) return store_failure::constraint;  // integrity constraint violation
    return store_failure::other;
}

store_error error(const PGconn* conn, const PGresult* result, std::string_view what) {
    const char* field = result == nullptr ? nullptr : PQresultErrorField(result, PG_DIAG_SQLSTATE);
    return error(conn, field == nullptr ? std::string() : std::string(field), what);
}

store_error error(const PGconn* conn, std::string sqlstate, std::string_view what) {
    const bool gone = conn != nullptr && broken(conn);
    const bool from_libpq = sqlstate.empty();
    // libpq reports a dropped connection without a SQLSTATE: 08006 is the standard's name for it.
    if (from_libpq && gone) sqlstate = "08006";
    const store_failure failure = gone ? store_failure::connection_lost : classify(sqlstate);
    std::string message = "idem: " + std::string(what) + " failed: " + describe(failure, sqlstate);
    if (!sqlstate.empty()) message += " (SQLSTATE " + sqlstate + ")";
    if (gone && from_libpq) {
        // libpq's own words about the connection ("server closed the connection unexpectedly");
        // they never quote statement values.
        std::string_view detail = PQerrorMessage(conn);
        detail = detail.substr(0, detail.find('\n'));
        if (!detail.empty()) message += ": " + std::string(detail);
    }
    return store_error(failure, message, sqlstate);
}

result& result::operator=(result&& other) noexcept {
    if (this != &other) {
        PQclear(result_);
        result_ = std::exchange(other.result_, nullptr);
    }
    return *this;
}

std::size_t result::affected() const noexcept {
    const char* text = PQcmdTuples(result_);
    return text == nullptr || *text == '\0' ? 0 : static_cast<std::size_t>(std::strtoull(text, nullptr, 10));
}

std::string_view result::bytes(int row, int column) const noexcept {
    const int size = PQgetlength(result_, row, column);
    if (size == 0) return {};
    return {PQgetvalue(result_, row, column), static_cast<std::size_t>(size)};
}

namespace {

[[noreturn]] void malformed(const char* type) {
    throw store_error(store_failure::corrupt_record, std::string("idem: PostgreSQL returned a malformed ") + type);
}

}  // namespace

bool result::boolean(int row, int column) const {
    if (is_null(row, column) || PQgetlength(result_, row, column) != 1) malformed("boolean");
    return *PQgetvalue(result_, row, column) != 0;
}

std::int64_t result::int8(int row, int column) const {
    if (is_null(row, column) || PQgetlength(result_, row, column) != 8) malformed("bigint");
    return from_network(PQgetvalue(result_, row, column));
}

time_point result::timestamp(int row, int column) const {
    if (is_null(row, column) || PQgetlength(result_, row, column) != 8) malformed("timestamp");
    // 'infinity' is INT64_MAX, '-infinity' INT64_MIN; they and any time past 2262
    // clamp to the ends of time_point.
    const std::int64_t since_2000 = from_network(PQgetvalue(result_, row, column));
    std::int64_t since_1970 = 0;
    if (__builtin_add_overflow(since_2000, std::int64_t{postgres_epoch} * 1'000'000, &since_1970))
        return since_2000 > 0 ? time_point::max() : time_point::min();
    return detail::saturating_time(std::chrono::microseconds(since_1970));
}

result execute(PGconn* conn, const char* sql, std::string_view what) {
    result r(PQexec(conn, sql));
    if (r.get() == nullptr || (r.status() != PGRES_COMMAND_OK && r.status() != PGRES_TUPLES_OK))
        throw error(conn, r.get(), what);
    return r;
}

bool commit_rolled_back(const result& commit) noexcept {
    const char* tag = PQcmdStatus(const_cast<PGresult*>(commit.get()));
    return tag != nullptr && std::strcmp(tag, "ROLLBACK") == 0;
}

store_error rolled_back_error() {
    return store_error(store_failure::other,
                       "idem: COMMIT failed: the transaction had already failed, so PostgreSQL rolled it back"
                       " (SQLSTATE 25P02)",
                       "25P02");
}

char* parameters::scratch() {
    if (count_ == capacity) throw std::logic_error("idem: too many statement parameters");
    return scratch_[count_].data();
}

parameters& parameters::null() {
    if (count_ == capacity) throw std::logic_error("idem: too many statement parameters");
    values_[count_] = nullptr;
    lengths_[count_] = 0;
    ++count_;
    return *this;
}

parameters& parameters::bytes(std::string_view value) {
    if (count_ == capacity) throw std::logic_error("idem: too many statement parameters");
    // A null pointer would be SQL NULL; an empty value must stay an empty bytea.
    values_[count_] = value.empty() ? "" : value.data();
    lengths_[count_] = static_cast<int>(value.size());
    ++count_;
    return *this;
}

parameters& parameters::bytes(std::span<const std::byte> value) {
    return bytes(std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
}

parameters& parameters::int8(std::int64_t value) {
    char* out = scratch();
    to_network(value, out);
    values_[count_] = out;
    lengths_[count_] = 8;
    ++count_;
    return *this;
}

parameters& parameters::boolean(bool value) {
    char* out = scratch();
    out[0] = value ? 1 : 0;
    values_[count_] = out;
    lengths_[count_] = 1;
    ++count_;
    return *this;
}

parameters& parameters::interval(duration value) {
    // Binary interval: microseconds, days, months. Durations fit: nanoseconds end
    // after 292 years, so now + any of them stays a valid timestamp.
    const std::int64_t micros = std::chrono::ceil<std::chrono::microseconds>(value).count();
    char* out = scratch();
    to_network(micros, out);
    to_network(std::int32_t{0}, out + 8);
    to_network(std::int32_t{0}, out + 12);
    values_[count_] = out;
    lengths_[count_] = 16;
    ++count_;
    return *this;
}

pipeline::pipeline(PGconn* conn) : conn_(conn) {
    items_.reserve(8);
    if (PQenterPipelineMode(conn_) != 1) throw error(conn_, nullptr, "entering pipeline mode");
    active_ = true;
}

pipeline::~pipeline() {
    leave();
}

pipeline::item& pipeline::add(std::string_view what) {
    item& i = items_.emplace_back();
    i.what = what;
    return i;
}

void pipeline::query(const char* sql, std::string_view what) {
    add(what);
    if (PQsendQueryParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) != 1) fail_to_send(what);
}

void pipeline::prepare(const std::string& name, const statement_text& text, bool* prepared) {
    add(text.what).prepared = prepared;
    if (PQsendPrepare(conn_, name.c_str(), text.sql, static_cast<int>(text.parameter_types.size()),
                      text.parameter_types.data()) != 1)
        fail_to_send(text.what);
}

bool pipeline::preparing(const bool* prepared) const noexcept {
    return std::any_of(items_.begin(), items_.end(), [&](const item& i) { return i.prepared == prepared; });
}

void pipeline::execute(const std::string& name, const statement_text& text, const parameters& values) {
    add(text.what);
    if (PQsendQueryPrepared(conn_, name.c_str(), values.count(), values.values(), values.lengths(), values.formats(),
                            1) != 1)
        fail_to_send(text.what);
}

void pipeline::execute(const statement_text& text, const parameters& values) {
    add(text.what);
    if (PQsendQueryParams(conn_, text.sql, values.count(), text.parameter_types.data(), values.values(),
                          values.lengths(), values.formats(), 1) != 1)
        fail_to_send(text.what);
}

void pipeline::fail_to_send(std::string_view what) {
    store_error failure = error(conn_, nullptr, what);
    leave();
    throw failure;
}

void pipeline::run() {
    if (PQpipelineSync(conn_) != 1) fail_to_send(items_.empty() ? "a pipeline" : items_.back().what);
    std::optional<store_error> failure;
    for (item& i : items_) {
        i.outcome = result(PQgetResult(conn_));
        if (i.outcome.get() == nullptr) {
            failure = error(conn_, nullptr, i.what);  // no answer at all: the connection broke
            break;
        }
        const ExecStatusType status = i.outcome.status();
        if (status == PGRES_FATAL_ERROR && !failure) failure = error(conn_, i.outcome.get(), i.what);
        if (status == PGRES_COMMAND_OK && i.prepared != nullptr) *i.prepared = true;
        if (broken(conn_)) {
            if (!failure) failure = error(conn_, nullptr, i.what);
            break;
        }
        // Each statement's results end with a null; anything else here is a protocol surprise.
        if (PGresult* extra = PQgetResult(conn_)) {
            PQclear(extra);
            if (!failure)
                failure = store_error(store_failure::other,
                                      "idem: " + std::string(i.what) + " failed: unexpected extra result");
        }
    }
    if (!broken(conn_)) {
        result sync(PQgetResult(conn_));
        if (sync.get() == nullptr || sync.status() != PGRES_PIPELINE_SYNC) {
            if (!failure) failure = error(conn_, sync.get(), "ending a pipeline");
        }
    }
    leave();
    if (failure) throw *failure;
}

void pipeline::leave() noexcept {
    if (!active_) return;
    active_ = false;
    if (PQexitPipelineMode(conn_) == 1 || broken(conn_)) return;
    // Statements were queued but their results not read (a failure midway):
    // end the pipeline and drop what comes back, so the session is usable again.
    (void)PQpipelineSync(conn_);
    for (int guard = 0; guard < 64 && !broken(conn_); ++guard) {
        PGresult* r = PQgetResult(conn_);
        if (r == nullptr) {
            if (PQexitPipelineMode(conn_) == 1) return;
            continue;
        }
        PQclear(r);
    }
}

std::string statement_names() {
    static std::atomic<unsigned long long> counter{0};
    return "idem" + std::to_string(++counter) + "_";
}

}  // namespace idem::detail::pg
