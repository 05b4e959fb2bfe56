// A free TCP port on the loopback interface, for a server a test starts.
#pragma once

namespace idem::test {

// A port on 127.0.0.1 that nothing listens on at the moment of the call (the
// kernel's pick, so parallel test processes do not collide), and never one
// this process was handed before.
[[nodiscard]] int free_loopback_port();

}  // namespace idem::test
