// The schema migrations of SqliteStore (store-private): the SQL files under store/migrations/,
// embedded into the library at build time (CMakeLists.txt generates migrations.cc from them).
#pragma once

#include <span>
#include <string_view>

namespace gpupool::store {

struct Migration {
  int version = 0;        // from the file name, "0001_initial.sql" -> 1
  std::string_view name;  // the file name
  std::string_view sql;   // the file's text, one or more statements
};

// Ascending version, 1, 2, … without gaps (the build checks it).
std::span<const Migration> EmbeddedMigrations();

}  // namespace gpupool::store
