// SQLite C API wrappers for SqliteStore (see sqlite_db.h).
#include "store/sqlite_db.h"

#include <sqlite3.h>

#include <utility>

namespace gpupool::store::sqlite {

Error SqliteError(sqlite3* db, int rc, std::string_view what) {
  ErrorCode code = ErrorCode::kInternal;
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      code = ErrorCode::kUnavailable;
      break;
    case SQLITE_CONSTRAINT:
      code = ErrorCode::kInvalidArgument;
      break;
    case SQLITE_FULL:
      code = ErrorCode::kInsufficientStorage;
      break;
    default:
      break;
  }
  // The connection's message describes its most recent failure; it is only trusted when that
  // failure is this one.
  std::string message = sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_extended_errcode(db) == rc) message = sqlite3_errmsg(db);
  return Error{code, std::string(what) + ": " + message};
}

Statement::Statement(sqlite3* db, sqlite3_stmt* stmt, std::string what)
    : db_(db), stmt_(stmt), what_(std::move(what)) {}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      what_(std::move(other.what_)),
      bind_error_(std::exchange(other.bind_error_, 0)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    what_ = std::move(other.what_);
    bind_error_ = std::exchange(other.bind_error_, 0);
  }
  return *this;
}

Statement& Statement::Bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, std::string_view value) {
  // SQLITE_TRANSIENT: SQLite copies the text, so temporaries may be bound. A null data pointer
  // would bind NULL, not the empty string.
  const char* data = value.data() != nullptr ? value.data() : "";
  const int rc =
      sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view bytes) {
  // A null pointer would bind NULL rather than an empty blob.
  const char* data = bytes.data() != nullptr ? bytes.data() : "";
  const int rc = sqlite3_bind_blob64(stmt_, index, data, bytes.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::BindNull(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Result<bool> Statement::Step() {
  if (bind_error_ != 0) return tl::unexpected(SqliteError(nullptr, bind_error_, what_));
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return tl::unexpected(SqliteError(db_, sqlite3_extended_errcode(db_), what_));
}

Status Statement::Run() {
  Resetter reset(*this);
  for (;;) {
    Result<bool> row = Step();
    if (!row) return tl::unexpected(row.error());
    if (!*row) return {};
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = 0;
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string Statement::Text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (text == nullptr) return {};
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string Statement::Blob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  if (data == nullptr) return {};
  return std::string(static_cast<const char*>(data),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

Result<std::unique_ptr<Database>> Database::Open(const std::string& path) {
  sqlite3* db = nullptr;
  // NOMUTEX: each connection is used by one thread at a time (SqliteStore guarantees it).
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Error error = SqliteError(db, rc, "open sqlite database " + path);
    sqlite3_close_v2(db);
    return tl::unexpected(std::move(error));
  }
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Database>(new Database(db, path));
}

Database::~Database() { sqlite3_close_v2(db_); }

Status Database::Exec(std::string_view sql, std::string_view what) {
  const std::string text(sql);
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return {};
  Error error = SqliteError(db_, rc, what);
  if (message != nullptr) {
    error.message = std::string(what) + ": " + message;
    sqlite3_free(message);
  }
  return tl::unexpected(std::move(error));
}

Result<Statement> Database::Prepare(std::string_view sql, std::string what) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return tl::unexpected(SqliteError(db_, rc, "prepare statement to " + what));
  }
  return Statement(db_, stmt, std::move(what));
}

Result<std::string> Database::QueryText(std::string_view sql, std::string what) {
  Result<Statement> stmt = Prepare(sql, std::move(what));
  if (!stmt) return tl::unexpected(stmt.error());
  Result<bool> row = stmt->Step();
  if (!row) return tl::unexpected(row.error());
  std::string value = *row ? stmt->Text(0) : std::string();
  stmt->Reset();
  return value;
}

Result<int64_t> Database::QueryInt(std::string_view sql, std::string what) {
  Result<Statement> stmt = Prepare(sql, std::move(what));
  if (!stmt) return tl::unexpected(stmt.error());
  Result<bool> row = stmt->Step();
  if (!row) return tl::unexpected(row.error());
  const int64_t value = *row ? stmt->Int(0) : 0;
  stmt->Reset();
  return value;
}

Status Database::SetBusyTimeout(int ms) {
  const int rc = sqlite3_busy_timeout(db_, ms);
  if (rc != SQLITE_OK) return tl::unexpected(SqliteError(db_, rc, "set busy timeout"));
  return {};
}

bool Database::AutoCommit() const { return sqlite3_get_autocommit(db_) != 0; }

}  // namespace gpupool::store::sqlite
