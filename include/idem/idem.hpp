// idem/idem.hpp: the core of idem in one include (stores and adapters have their own headers).
//
//   #include <idem/idem.hpp>
//   #include <idem/memory_store.hpp>
//   idem::executor exec{std::make_shared<idem::memory_store>()};
//   auto e = exec.execute(key, fingerprint, {}, [&] { return work(); }, idem::string_codec{});
#pragma once

#include "idem/clock.hpp"
#include "idem/encryption.hpp"
#include "idem/error.hpp"
#include "idem/execution.hpp"
#include "idem/executor.hpp"
#include "idem/inbox.hpp"
#include "idem/keys.hpp"
#include "idem/mode.hpp"
#include "idem/options.hpp"
#include "idem/record_key.hpp"
#include "idem/record_store.hpp"
#include "idem/result_codec.hpp"
#include "idem/scope.hpp"
#include "idem/scope_resolvers.hpp"
#include "idem/telemetry.hpp"
#include "idem/transactional_record_store.hpp"
#include "idem/unit_of_work.hpp"
#include "idem/webhook.hpp"
