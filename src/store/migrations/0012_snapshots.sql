-- 0012: snapshots of tasks' workspaces (docs/snapshots.md). A task's snapshot settings, its run
-- number, the snapshot its next run starts from and the work its last interruption lost; one row
-- per snapshot (its files are a manifest and chunks in the project's chunk store, addressed by
-- their SHA-256, not here).

ALTER TABLE tasks ADD COLUMN snapshot_every_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN checkpoint_signal TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN checkpoint_timeout_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN run INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN resume_from TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN work_lost_ms INTEGER NOT NULL DEFAULT 0;

CREATE TABLE snapshots (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  task_id TEXT NOT NULL,
  project_id TEXT NOT NULL,
  run INTEGER NOT NULL,
  trigger TEXT NOT NULL,
  consistency TEXT NOT NULL,
  node TEXT NOT NULL,
  manifest TEXT NOT NULL,
  files INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  new_bytes INTEGER NOT NULL,
  taken_ms INTEGER NOT NULL,
  frozen_ms INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL
);
CREATE INDEX snapshots_by_task ON snapshots (task_id);
