-- 0007: a task's declared TCP ports (gpupool submit --port), which the gateway serves at
-- /t/<task>/<port>/: decimal numbers joined by commas, "" for none. Existing tasks declared none.

ALTER TABLE tasks ADD COLUMN ports TEXT NOT NULL DEFAULT '';
