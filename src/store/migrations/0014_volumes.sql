-- 0014: volumes (docs/volumes.md): a project's data that outlives its tasks, one row each, and
-- the volumes a task mounts, as a JSON array of {volume_id, name, path, read_only, shared}.
-- Existing tasks mount none.

ALTER TABLE tasks ADD COLUMN volumes TEXT NOT NULL DEFAULT '[]';

CREATE TABLE volumes (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  project_id TEXT NOT NULL,
  name TEXT NOT NULL,
  size_bytes INTEGER NOT NULL,
  shared INTEGER NOT NULL,
  node TEXT NOT NULL,
  deleting INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  created_by TEXT NOT NULL
);
