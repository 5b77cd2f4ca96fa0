// A thin RAII layer over the SQLite C API for SqliteStore (store-private): a connection, cached
// prepared statements with typed binds and column reads, and SQLite result codes turned into
// Errors ("<what>: <sqlite message>").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gpupool::store::sqlite {

// The Error for SQLite result code `rc` on `db` (its message, when there is one). Busy and locked
// are kUnavailable, constraint failures kInvalidArgument, a full disk (SQLITE_FULL)
// kInsufficientStorage, the rest kInternal (I/O errors included).
Error SqliteError(sqlite3* db, int rc, std::string_view what);

// A prepared statement. Binds are 1-based, columns 0-based. After the last Step, call Reset (or
// hold a Statement::Resetter) so the statement releases its read snapshot and bindings.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::string what);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, std::string_view value);
  Statement& BindNull(int index);
  // Bytes stored as a BLOB (no text encoding involved).
  Statement& BindBlob(int index, std::string_view bytes);
  // Without these, Bind(i, "literal") would pick the integer overload through bool.
  Statement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Statement& Bind(int index, const std::string& value) {
    return Bind(index, std::string_view(value));
  }

  // One step: true when a row is ready, false when the statement is done. A bind that failed
  // earlier is reported here.
  Result<bool> Step();
  // Steps to the end (a statement that returns no rows) and resets.
  Status Run();
  // Resets the statement and clears its bindings.
  void Reset();

  int64_t Int(int column) const;
  std::string Text(int column) const;
  std::string Blob(int column) const;
  bool IsNull(int column) const;

  // Resets the statement when it goes out of scope.
  class Resetter {
   public:
    explicit Resetter(Statement& s) : s_(s) {}
    ~Resetter() { s_.Reset(); }
    Resetter(const Resetter&) = delete;
    Resetter& operator=(const Resetter&) = delete;

   private:
    Statement& s_;
  };

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string what_;    // what the statement does, for error messages
  int bind_error_ = 0;  // the first failed bind's result code, reported by Step
};

// An open connection.
class Database {
 public:
  // Opens (creating if needed) the database file at `path`.
  static Result<std::unique_ptr<Database>> Open(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return nothing of interest.
  Status Exec(std::string_view sql, std::string_view what);
  // Prepares a statement kept for the life of the connection.
  Result<Statement> Prepare(std::string_view sql, std::string what);
  // A pragma's (or any single-value query's) first column as text; "" when no row.
  Result<std::string> QueryText(std::string_view sql, std::string what);
  // The first column of the first row as an integer; 0 when no row.
  Result<int64_t> QueryInt(std::string_view sql, std::string what);

  Status SetBusyTimeout(int ms);
  // Whether no transaction is open (SQLite rolls back on some errors, e.g. a full disk).
  bool AutoCommit() const;
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
};

}  // namespace gpupool::store::sqlite
