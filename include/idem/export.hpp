// idem/export.hpp: IDEM_API marks what idem's shared libraries export. They
// are built with hidden visibility, so only the declarations marked here (the
// public API) are visible to programs that link them. IDEM_LOCAL keeps a
// class's private implementation, defined in a library source, inside its
// library although the class is exported:
//
//   class IDEM_API ledger {                                // a class and its members
//   public:
//       void post(std::string_view entry);
//   private:
//       struct impl;
//       std::unique_ptr<impl> impl_;
//   };
//   struct IDEM_LOCAL ledger::impl { std::string entries; };  // in ledger.cpp
//   [[nodiscard]] IDEM_API std::string key_hash_of(std::string_view key);  // a function
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define IDEM_API __attribute__((visibility("default")))
#define IDEM_LOCAL __attribute__((visibility("hidden")))
#else
#define IDEM_API
#define IDEM_LOCAL
#endif
