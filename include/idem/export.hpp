// idem/export.hpp: IDEM_API marks what idem's shared libraries export. They
// are built with hidden visibility, so only the declarations marked here (the
// public API) are visible to programs that link them. IDEM_LOCAL keeps a
// class's private implementation, defined in a library source, inside its
// library although the class is exported:
//
//   class IDEM_API executor { ... };                       // a class and its members
//   [[nodiscard]] IDEM_API std::string key_hash_of(...);   // a function
//   struct IDEM_LOCAL sqlite_store::impl { ... };          // in sqlite_store.cpp
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define IDEM_API __attribute__((visibility("default")))
#define IDEM_LOCAL __attribute__((visibility("hidden")))
#else
#define IDEM_API
#define IDEM_LOCAL
#endif
