-- 0009: a project's storage quota, the bytes the server may keep of its tasks' files (inputs,
-- outputs, unfinished uploads); -1 is unlimited, which existing projects keep.

ALTER TABLE projects ADD COLUMN max_storage_bytes INTEGER NOT NULL DEFAULT -1
  CHECK (max_storage_bytes >= -1);
