// idem/operation_state.hpp: what is stored of an operation in steps
// (idem/steps.hpp): its state, recovery point, fencing token, the completer's
// attempts, and each stored step with its result and attempts. `idem inspect`
// prints it, `idem complete` lists the unfinished ones, and an HTTP endpoint
// in steps answers 202 with it while the operation is being completed.
//
//   if (auto s = idem::inspect_operation(db, key)) {        // idem/operations.hpp
//       print(idem::to_string(s->phase), s->recovery_point, s->completions);
//       for (const idem::operation_step& step : s->steps) print(step.name, step.attempts, step.result.size());
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.hpp"
#include "idem/export.hpp"

namespace idem {

enum class operation_phase {
    running,       // its steps are under way (or were, and its lease ended)
    compensating,  // the completer undoes it: its compensation's steps are under way
    completed,     // its final result is stored and replayed
    compensated,   // its compensation finished: that is its final result
};

[[nodiscard]] IDEM_API std::string_view to_string(operation_phase p) noexcept;

// What an operator's release of an unfinished operation did (table_admin::release_operation, `idem complete`).
enum class release_outcome {
    released,         // its lease ended now and its fence moved on: the next completer pass or retry takes it over
    not_found,        // no unfinished operation with that key: nothing changed
    no_compensation,  // to compensate, and it began with no compensation registered: nothing changed
};

struct IDEM_API operation_step {
    std::size_t position = 0;
    std::string name;
    bool call = false;          // a call (outside any transaction) rather than a step
    bool answered = false;      // its result is stored (a call made and never answered: false)
    bool compensation = false;  // one of the compensation's steps
    int attempts = 0;           // runs of the step's transaction that it took, or calls made
    std::string result;         // the stored result's bytes (empty while unanswered)
    time_point updated_at = {};
};

struct IDEM_API operation_state {
    std::string record_id;  // 32 hex characters: the SQL key_hash `idem inspect` takes
    std::string name_space;
    operation_phase phase = operation_phase::running;
    std::int64_t fence = 0;          // the fencing token: every takeover adds one
    std::size_t recovery_point = 0;  // the position after the last stored step
    int completions = 0;             // runs the completer took it over for
    int failures = 0;  // of those, the runs that failed (not those that died): compensate_after counts these
    std::optional<std::size_t> compensate_from = {};  // the first compensation step's position
    time_point expires_at = {};                       // the lease's end while unfinished, the retention's once finished
    time_point updated_at = {};
    time_point now = {};          // the database's clock when it was read
    std::size_t input_bytes = 0;  // the input it began with (op.input())
    std::string result = {};      // its final result, once finished
    std::string last_error = {};  // what the completer's last failed run threw
    std::vector<operation_step> steps = {};

    [[nodiscard]] bool finished() const noexcept {
        return phase == operation_phase::completed || phase == operation_phase::compensated;
    }
    // Unfinished and its lease ended: the completer's to take over. Finished: its retention ended.
    [[nodiscard]] bool expired() const noexcept { return expires_at <= now; }
};

}  // namespace idem
