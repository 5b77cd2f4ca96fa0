-- 0001: the initial schema of SqliteStore. Scalars that are queried are columns; nested data
-- (task request, command, placement; node GPUs and labels; user projects) is JSON text, see
-- src/store/record_json.h. Enums are stored by their lower-case names (records.h).

CREATE TABLE projects (
  id            TEXT NOT NULL PRIMARY KEY CHECK (id <> ''),
  name          TEXT NOT NULL,
  max_gpu_milli INTEGER NOT NULL,
  max_tasks     INTEGER NOT NULL,
  stop_grace_ms INTEGER NOT NULL,
  created_ms    INTEGER NOT NULL
) STRICT;

CREATE TABLE users (
  id         TEXT NOT NULL PRIMARY KEY CHECK (id <> ''),
  name       TEXT NOT NULL,
  role       TEXT NOT NULL CHECK (role IN ('admin', 'member')),
  projects   TEXT NOT NULL,  -- JSON array of project ids
  created_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE access_keys (
  access_key    TEXT NOT NULL PRIMARY KEY CHECK (access_key <> ''),
  user_id       TEXT NOT NULL,
  sealed_secret BLOB NOT NULL,  -- ciphertext: any bytes
  description   TEXT NOT NULL,
  created_ms    INTEGER NOT NULL,
  revoked_ms    INTEGER NOT NULL
) STRICT;
CREATE INDEX access_keys_by_user ON access_keys (user_id);

CREATE TABLE nodes (
  name              TEXT NOT NULL PRIMARY KEY CHECK (name <> ''),
  status            TEXT NOT NULL CHECK (status IN ('ready', 'lost')),
  draining          INTEGER NOT NULL,
  registered_ms     INTEGER NOT NULL,
  last_heartbeat_ms INTEGER NOT NULL,
  node              TEXT NOT NULL  -- JSON: capacity, GPUs with MIG instances, labels, cordon
) STRICT;

CREATE TABLE tasks (
  id              TEXT NOT NULL PRIMARY KEY CHECK (id <> ''),
  seq             INTEGER NOT NULL,
  project_id      TEXT NOT NULL,
  user_id         TEXT NOT NULL,
  name            TEXT NOT NULL,
  request         TEXT NOT NULL,  -- JSON TaskRequest
  image           TEXT NOT NULL,
  command         TEXT NOT NULL,  -- JSON array of strings
  disk_gib        INTEGER NOT NULL,
  max_runtime_ms  INTEGER NOT NULL,
  stop_when       TEXT NOT NULL,
  restartable     INTEGER NOT NULL,
  state           TEXT NOT NULL,
  reason          TEXT NOT NULL,
  placement       TEXT,           -- JSON TaskPlacement; NULL while not placed
  created_ms      INTEGER NOT NULL,
  updated_ms      INTEGER NOT NULL,
  bound_ms        INTEGER NOT NULL,
  started_ms      INTEGER NOT NULL,
  finished_ms     INTEGER NOT NULL,
  billed_until_ms INTEGER NOT NULL,
  exit_code       INTEGER NOT NULL,
  preemptions     INTEGER NOT NULL
) STRICT;
CREATE INDEX tasks_by_seq ON tasks (seq);
CREATE INDEX tasks_by_project_state ON tasks (project_id, state);

CREATE TABLE prices (
  resource        TEXT NOT NULL CHECK (resource <> ''),
  effective_ms    INTEGER NOT NULL,
  micros_per_hour INTEGER NOT NULL,
  PRIMARY KEY (resource, effective_ms)
) STRICT, WITHOUT ROWID;

-- A task's history; id (the rowid) is the insertion order.
CREATE TABLE events (
  id         INTEGER PRIMARY KEY,
  task_id    TEXT NOT NULL CHECK (task_id <> ''),
  time_ms    INTEGER NOT NULL,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  reason     TEXT NOT NULL
) STRICT;
CREATE INDEX events_by_task ON events (task_id);

-- The projects' accounts; never deleted. `key` makes metering idempotent.
CREATE TABLE ledger (
  id            INTEGER PRIMARY KEY,
  "key"         TEXT NOT NULL UNIQUE CHECK ("key" <> ''),
  project_id    TEXT NOT NULL CHECK (project_id <> ''),
  task_id       TEXT NOT NULL,
  kind          TEXT NOT NULL CHECK (kind IN ('credit', 'usage')),
  amount_micros INTEGER NOT NULL CHECK (amount_micros > 0),
  from_ms       INTEGER NOT NULL,
  to_ms         INTEGER NOT NULL,
  detail        TEXT NOT NULL,
  created_ms    INTEGER NOT NULL
) STRICT;
CREATE INDEX ledger_by_project ON ledger (project_id, created_ms);
CREATE INDEX ledger_by_project_task ON ledger (project_id, task_id, created_ms);

CREATE TABLE nonces (
  access_key   TEXT NOT NULL CHECK (access_key <> ''),
  nonce        TEXT NOT NULL CHECK (nonce <> ''),
  timestamp_ms INTEGER NOT NULL,
  PRIMARY KEY (access_key, nonce)
) STRICT, WITHOUT ROWID;
CREATE INDEX nonces_by_time ON nonces (timestamp_ms);

CREATE TABLE settings (
  "key" TEXT NOT NULL PRIMARY KEY CHECK ("key" <> ''),
  value TEXT NOT NULL
) STRICT;
