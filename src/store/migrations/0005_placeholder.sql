-- 0005: a placeholder on the arrays branch only. Number 0005 belongs to another helper's branch;
-- this file keeps the versions without a gap until that branch is merged, and is deleted then.
SELECT 1;
