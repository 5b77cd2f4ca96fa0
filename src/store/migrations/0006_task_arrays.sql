-- 0006: job arrays. A task may be an element of an array (gpupool submit --array 0-99%10): the
-- array's id, the element's index and the array's limit of elements running at once. An array's
-- elements are listed in seq order (GET /v1/tasks?array=a-7), by the index below; tasks from
-- before arrays existed are in none.

ALTER TABLE tasks ADD COLUMN array_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN array_index INTEGER NOT NULL DEFAULT 0 CHECK (array_index >= 0);
ALTER TABLE tasks ADD COLUMN array_limit INTEGER NOT NULL DEFAULT 0 CHECK (array_limit >= 0);
CREATE INDEX tasks_by_array_seq ON tasks (array_id, seq) WHERE array_id != '';
