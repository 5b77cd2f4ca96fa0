-- 0013: a snapshot's saved image (docs/snapshots.md "Saving a container as an image"): the id of
-- the image a run restored from it runs in, the image it was saved from, its archive's size, and
-- whether this snapshot saved it (else it is its run's, kept). image_id '' : none.

ALTER TABLE snapshots ADD COLUMN image_id TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN image_base TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN image_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE snapshots ADD COLUMN image_saved INTEGER NOT NULL DEFAULT 0;
