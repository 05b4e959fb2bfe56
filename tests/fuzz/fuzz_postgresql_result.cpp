// Any binary values in the rows PostgreSQL answers the store's statements with
// (each column NULL or any bytes, as a broken server or proxy could send):
// decoding them either works or fails with store_error (corrupt_record, or
// unsupported for an isolation level other than READ COMMITTED); timestamps
// clamp ('infinity', past 2262) instead of overflowing. Results are built in
// memory: no server.
#include <libpq-fe.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "postgresql_records.hpp"

namespace {

namespace pg = idem::detail::pg;

// A one-row result with one binary column per part; a part "\xff" alone is NULL.
pg::result row_of(const std::vector<std::string_view>& values, int columns) {
    PGresult* r = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
    if (r == nullptr) throw std::bad_alloc();
    std::vector<PGresAttDesc> attributes(static_cast<std::size_t>(columns));
    std::vector<std::string> names(attributes.size());
    for (std::size_t i = 0; i < attributes.size(); ++i) {
        names[i] = "c" + std::to_string(i);
        attributes[i] = PGresAttDesc{names[i].data(), 0, 0, 1, 0, -1, -1};  // format 1: binary
    }
    if (!PQsetResultAttrs(r, columns, attributes.data())) throw std::runtime_error("PQsetResultAttrs failed");
    for (int c = 0; c < columns; ++c) {
        const std::string_view v = idem::fuzz::part(values, static_cast<std::size_t>(c));
        const bool null = v == "\xff";
        if (!PQsetvalue(r, 0, c, null ? nullptr : const_cast<char*>(v.data()), null ? -1 : static_cast<int>(v.size())))
            throw std::runtime_error("PQsetvalue failed");
    }
    return pg::result(r);
}

template <class Step>
void expect_only_store_errors(Step step) {
    try {
        step();
    } catch (const idem::store_error& e) {
        if (e.failure() != idem::store_failure::corrupt_record && e.failure() != idem::store_failure::unsupported &&
            e.failure() != idem::store_failure::other)
            throw;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const idem::record_key key("fuzz", "k");
    const auto values = idem::fuzz::split(idem::fuzz::as_text(data, size));
    expect_only_store_errors([&] {
        const auto r = pg::reserve_answer(row_of(values, 5), key, "fp", "token");
        if (r && r->status == idem::reservation_status::reserved && r->token != "token")
            throw std::logic_error("reserved with another token");
    });
    expect_only_store_errors([&] {
        const auto r = pg::locked_answer(row_of(values, 5), key, "fp");
        if (r && r->status == idem::reservation_status::reserved) throw std::logic_error("a read answered reserved");
    });
    expect_only_store_errors([&] {
        if (const auto s = pg::inspected(row_of(values, 9), true)) {
            if (s->expired() != (s->expires_at <= s->now)) throw std::logic_error("expired() disagrees");
        }
    });
    expect_only_store_errors([&] { (void)pg::done_at_read_committed(row_of(values, 2), "fuzzing"); });
    return 0;
}
