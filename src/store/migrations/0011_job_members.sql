-- 0011: distributed jobs (gpupool submit --nodes N). A job's member whose run ended because
-- another member's did (fate sharing) names that member here; empty when it ended by itself.
-- The job itself is its members' gang id ("j-<first seq>") in the request, and a member's
-- index is its seq past the first, so nothing else is stored.

ALTER TABLE tasks ADD COLUMN ended_by TEXT NOT NULL DEFAULT '';
