-- 0004: tasks read from the store. The server keeps finished tasks in memory only for its
-- retention (--retain-finished); older ones are read from here: one by id (the primary key), a
-- page after a seq cursor by project or by state (the two indexes below, each in seq order), and
-- at start-up only the tasks that are live or finished within the retention (by state, and by
-- finished_ms). The (project_id, state) index served no query and goes.

DROP INDEX tasks_by_project_state;
CREATE INDEX tasks_by_project_seq ON tasks (project_id, seq);
CREATE INDEX tasks_by_state_seq ON tasks (state, seq);
CREATE INDEX tasks_by_finished ON tasks (finished_ms);
