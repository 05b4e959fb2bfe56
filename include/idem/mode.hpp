// idem/mode.hpp: how strictly an operation is made idempotent.
//
// Roll a new idempotent operation out in observe, read the telemetry, then
// switch to enforce through configuration:
//
//   auto m = idem::parse_mode(config["idempotency.mode"]);  // "off", "observe", "enforce"
//   options.mode = m;
#pragma once

#include <string_view>

#include "idem/export.hpp"

namespace idem {

enum class mode {
    off,      // run the operation; touch no store
    observe,  // run the operation exactly as without idempotency; record and count what enforce would do
    enforce,  // run at most once; replay to retries
};

[[nodiscard]] IDEM_API std::string_view to_string(mode m) noexcept;
// "off", "observe" or "enforce" in any ASCII casing; anything else is std::invalid_argument.
[[nodiscard]] IDEM_API mode parse_mode(std::string_view text);

}  // namespace idem
