-- 0015: datasets (docs/datasets.md): a project's read-only, versioned directories of files, one
-- row each with its versions as a JSON array of {version, manifest, files, bytes, new_bytes,
-- created_ms, created_by}, and the datasets a task mounts, as a JSON array of {dataset_id, name,
-- version, path, project_id, manifest}. Existing tasks mount none.

ALTER TABLE tasks ADD COLUMN datasets TEXT NOT NULL DEFAULT '[]';

CREATE TABLE datasets (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  project_id TEXT NOT NULL,
  name TEXT NOT NULL,
  published INTEGER NOT NULL,
  versions TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  created_by TEXT NOT NULL
);
