-- 0005: intentionally empty. The number was reserved for the SSH keys' table of a branch that
-- had not landed when the job arrays (0006) and task ports (0007) did; a database may already be
-- at version 5 with this file, so that table comes in a later migration of its own (0008 or on).
SELECT 1;
