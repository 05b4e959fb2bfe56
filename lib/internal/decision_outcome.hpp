// The outcome a decision counts as (idem_decisions_total) for what an
// execution's status says.
#pragma once

#include "idem/execution.hpp"
#include "idem/telemetry.hpp"

namespace idem::detail {

inline outcome outcome_of(execution_status status) {
    switch (status) {
        case execution_status::executed: return outcome::executed;
        case execution_status::replayed: return outcome::replay;
        case execution_status::in_flight: return outcome::in_flight;
        case execution_status::key_reused: return outcome::key_reused;
        case execution_status::expired: return outcome::expired;
    }
    return outcome::executed;
}

}  // namespace idem::detail
