// A test-only fault point: IDEM_PAYMENTS_CRASH_AT names one; the process dies
// there (SIGKILL: no cleanup, no answer), as a crash would, the
// IDEM_PAYMENTS_CRASH_AFTER-th time any thread reaches it (the first by default).
#pragma once

namespace payments {

void crash_point(const char* name);

}  // namespace payments
