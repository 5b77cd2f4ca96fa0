-- 0003: held tasks. A task submitted with "hold" stays pending outside the scheduler's queue
-- until it is released (its inputs are uploaded meanwhile); the hold must survive a restart.
-- Existing tasks were never held.

ALTER TABLE tasks ADD COLUMN held INTEGER NOT NULL DEFAULT 0 CHECK (held IN (0, 1));
